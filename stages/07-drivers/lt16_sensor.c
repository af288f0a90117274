// SPDX-License-Identifier: GPL-2.0
/*
 * Grade the LT16 driver (drivers/hwmon/lt16.c) against its datasheet,
 * exercises/07-drivers/README.md: i2c-stub plays the chip, the test seeds
 * its registers and checks temp1_input against the datasheet's conversion,
 * computed here independently of the driver, for every one of the 8192
 * temperature codes. The probe is watched through tracefs: a kretprobe
 * gives lt16_probe()'s return value, and the smbus trace events show every
 * transfer the driver makes, so that a probe that writes to a chip it
 * should have left alone, or that changes the error the bus gave, shows.
 */
#include "i2c_stub_util.h"
#include "kselftest_harness.h"

#define LT16_ADDR	0x4c
/* An address at which i2c-stub has no chip: every transfer fails there. */
#define ABSENT_ADDR	0x4d
#define WHO_AM_I	0x00
#define CONFIG		0x01
#define TEMP_MSB	0x02
#define TEMP_LSB	0x03
#define LT16_ID		0xa5

#define TRACING		"/sys/kernel/tracing"
#define PROBE_EVENT	"lab_lt16/probe_ret"

/* Datasheet section 3: 13-bit two's complement, 1/32 degree per step. */
static long datasheet_mc(__u8 msb, __u8 lsb)
{
	int raw = (msb << 5) | (lsb >> 3);

	if (raw & 0x1000)
		raw -= 0x2000;
	return raw * 1000L / 32;
}

/* The registers for the 13-bit code @t, with @junk in TEMP_LSB's bits 2..0. */
static void code_to_regs(unsigned int t, unsigned int junk, __u8 *msb, __u8 *lsb)
{
	*msb = t >> 5;
	*lsb = ((t & 0x1f) << 3) | (junk & 7);
}

/* The temperature a code stands for, from the datasheet's examples. */
static long code_mc(unsigned int t)
{
	long steps = t & 0x1000 ? (long)t - 0x2000 : (long)t;

	/* C's division truncates towards zero, as the datasheet asks. */
	return steps * 1000 / 32;
}

/* delete_device() for a client that may not exist, without a kernel complaint. */
static void forget(__u16 addr)
{
	char path[96];

	client_dir(path, sizeof(path), addr);
	if (access(path, F_OK) == 0)
		delete_device(addr);
}

static int hwmon_of_lt16(char *out, size_t len)
{
	return hwmon_dir(out, len, LT16_ADDR);
}

/*
 * Every code from @first to @last, each with other junk in TEMP_LSB's
 * undefined bits; returns the number of codes that read back wrong, and
 * logs the first few.
 */
static int sweep(struct __test_metadata *_metadata, unsigned int first, unsigned int last)
{
	char hwmon[192], path[256];
	unsigned int t;
	int wrong = 0;
	__u8 msb, lsb;
	long got;

	if (hwmon_of_lt16(hwmon, sizeof(hwmon))) {
		TH_LOG("no hwmon device");
		return -1;
	}
	snprintf(path, sizeof(path), "%s/temp1_input", hwmon);
	for (t = first; t <= last; t++) {
		code_to_regs(t, t * 5 + (t >> 3), &msb, &lsb);
		if (seed_byte(LT16_ADDR, TEMP_MSB, msb) || seed_byte(LT16_ADDR, TEMP_LSB, lsb)) {
			TH_LOG("seeding code %#06x failed", t);
			return -1;
		}
		got = read_long(path);
		if (got != code_mc(t) || got != datasheet_mc(msb, lsb)) {
			if (wrong++ < 8)
				TH_LOG("T %#06x (MSB %#04x LSB %#04x): %ld m°C, the datasheet says %ld",
				       t, msb, lsb, got, code_mc(t));
		}
	}
	if (wrong)
		TH_LOG("%d of %u codes read wrong", wrong, last - first + 1);
	return wrong;
}

static int write_tracing(const char *file, const char *text, int append)
{
	char path[128];
	int fd, ret = 0;

	snprintf(path, sizeof(path), TRACING "/%s", file);
	fd = open(path, O_WRONLY | (append ? O_APPEND : O_TRUNC));
	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* lt16_probe()'s return value as a trace event, and the SMBus transfers. */
static int tracing_on(void)
{
	static const char * const events[] = {
		"events/smbus/smbus_read/enable", "events/smbus/smbus_write/enable",
		"events/smbus/smbus_result/enable", "events/" PROBE_EVENT "/enable",
	};
	unsigned int i;
	int ret;

	write_tracing("events/" PROBE_EVENT "/enable", "0", 0);
	write_tracing("kprobe_events", "-:" PROBE_EVENT "\n", 1);
	ret = write_tracing("kprobe_events", "r:" PROBE_EVENT " lt16:lt16_probe ret=$retval:s32\n", 1);
	if (ret)
		return ret;
	for (i = 0; i < ARRAY_SIZE(events); i++) {
		ret = write_tracing(events[i], "1", 0);
		if (ret)
			return ret;
	}
	return write_tracing("tracing_on", "1", 0);
}

static void tracing_clear(void)
{
	write_tracing("trace", "", 0);
}

struct probe_seen {
	int returned;		/* lt16_probe() returned (kretprobe fired) */
	int ret;		/* its value */
	int reads;		/* SMBus reads from the chip's address */
	int writes;		/* SMBus writes to it */
	int who_am_i_reads;	/* byte-data reads of register 0 */
	int other_reads;	/* reads of anything else, or of another size */
	char first_write[160];
};

/* What the trace shows since the last tracing_clear(), for @addr. */
static int probe_seen(struct probe_seen *seen, __u16 addr)
{
	char line[512], me[32];
	FILE *trace;

	memset(seen, 0, sizeof(*seen));
	snprintf(me, sizeof(me), "i2c-%d a=%03x ", stub_bus, addr);
	trace = fopen(TRACING "/trace", "r");
	if (!trace)
		return -errno;
	while (fgets(line, sizeof(line), trace)) {
		char *ret = strstr(line, " ret=");

		if (strstr(line, "probe_ret:") && ret) {
			seen->returned++;
			seen->ret = atoi(ret + 5);
		} else if (strstr(line, "smbus_write:") && strstr(line, me)) {
			if (!seen->writes++)
				snprintf(seen->first_write, sizeof(seen->first_write), "%s",
					 strstr(line, "smbus_write:"));
		} else if (strstr(line, "smbus_read:") && strstr(line, me)) {
			seen->reads++;
			if (strstr(line, "c=0 BYTE_DATA"))
				seen->who_am_i_reads++;
			else
				seen->other_reads++;
		}
	}
	fclose(trace);
	return 0;
}

FIXTURE(lt16) {
	int unused;
};

FIXTURE_SETUP(lt16)
{
	ASSERT_LE(0, stub_load()) TH_LOG("no i2c-stub adapter");
	ASSERT_EQ(0, system("modprobe lt16"));
	forget(LT16_ADDR);
	forget(ABSENT_ADDR);
	/* Power-on state: shut down, temperature 0. */
	ASSERT_EQ(0, seed_byte(LT16_ADDR, CONFIG, 0x01));
	ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_MSB, 0));
	ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_LSB, 0));
	/*
	 * i2c-stub keeps a 16-bit cell per register and a byte read returns
	 * its low byte. The high byte is not the LT16's: only a byte-data
	 * read, as the datasheet says, sees 0xa5.
	 */
	ASSERT_EQ(0, seed_word(LT16_ADDR, WHO_AM_I, 0x5a00 | LT16_ID));
	ASSERT_EQ(0, tracing_on()) TH_LOG("tracefs: kprobe on lt16_probe or smbus events");
}

FIXTURE_TEARDOWN(lt16)
{
	forget(LT16_ADDR);
	forget(ABSENT_ADDR);
}

TEST_F(lt16, probe_starts_conversions_and_removal_stops_them)
{
	struct probe_seen seen;

	tracing_clear();
	ASSERT_EQ(0, new_device("lt16", LT16_ADDR));
	ASSERT_TRUE(driver_bound(LT16_ADDR));
	ASSERT_EQ(0, probe_seen(&seen, LT16_ADDR));
	EXPECT_EQ(1, seen.returned);
	EXPECT_EQ(0, seen.ret);
	EXPECT_EQ(0x00, peek_byte(LT16_ADDR, CONFIG));
	delete_device(LT16_ADDR);
	EXPECT_EQ(0x01, peek_byte(LT16_ADDR, CONFIG));
}

TEST_F(lt16, positive_temperatures_follow_the_registers)
{
	static const __u8 regs[][2] = {
		{ 0x00, 0x00 },	/* 0 */
		{ 0x00, 0x08 },	/* one step, 1/32 degree */
		{ 0x19, 0x00 },	/* 25 */
		{ 0x19, 0x07 },	/* 25: bits 2..0 of TEMP_LSB are not data */
		{ 0x64, 0x80 },	/* 100.5 */
		{ 0x7f, 0xf8 },	/* the top of the range */
		{ 0x7f, 0xff },
		{ 0x01, 0xa8 },	/* 1.65625: bits from both registers */
	};
	/* The datasheet's own figures, typed in: +25, +0.03125, +127.96875. */
	static const struct { unsigned int t; long mc; } known[] = {
		{ 0x0320, 25000 }, { 0x0001, 31 }, { 0x0fff, 127968 }, { 0x0000, 0 },
	};
	char hwmon[192];
	unsigned int i;
	__u8 msb, lsb;

	ASSERT_EQ(0, new_device("lt16", LT16_ADDR));
	ASSERT_EQ(0, hwmon_of_lt16(hwmon, sizeof(hwmon))) TH_LOG("no hwmon device");
	for (i = 0; i < ARRAY_SIZE(regs); i++) {
		ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_MSB, regs[i][0]));
		ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_LSB, regs[i][1]));
		EXPECT_EQ(datasheet_mc(regs[i][0], regs[i][1]), attr(hwmon, "temp1_input"))
			TH_LOG("MSB %#04x LSB %#04x", regs[i][0], regs[i][1]);
	}
	for (i = 0; i < ARRAY_SIZE(known); i++) {
		code_to_regs(known[i].t, 0, &msb, &lsb);
		ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_MSB, msb));
		ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_LSB, lsb));
		EXPECT_EQ(known[i].mc, attr(hwmon, "temp1_input")) TH_LOG("T %#06x", known[i].t);
	}
	/* Every code from 0 to +127.96875. */
	EXPECT_EQ(0, sweep(_metadata, 0x0000, 0x0fff));
}

TEST_F(lt16, negative_temperatures_are_sign_extended_from_13_bits)
{
	static const __u8 regs[][2] = {
		{ 0xff, 0xf8 },	/* one step below 0 */
		{ 0xff, 0xff },
		{ 0xd8, 0x00 },	/* -40 */
		{ 0xfe, 0x70 },	/* -3.0625: bits from both registers */
		{ 0x80, 0x00 },	/* the bottom of the range, -128 */
		{ 0x80, 0x08 },
	};
	/* -0.03125 truncates to -31, not -32; -40; -128; -127.96875. */
	static const struct { unsigned int t; long mc; } known[] = {
		{ 0x1fff, -31 }, { 0x1b00, -40000 }, { 0x1000, -128000 }, { 0x1001, -127968 },
		{ 0x1ffd, -93 },
	};
	char hwmon[192];
	unsigned int i;
	__u8 msb, lsb;

	ASSERT_EQ(0, new_device("lt16", LT16_ADDR));
	ASSERT_EQ(0, hwmon_of_lt16(hwmon, sizeof(hwmon))) TH_LOG("no hwmon device");
	for (i = 0; i < ARRAY_SIZE(regs); i++) {
		ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_MSB, regs[i][0]));
		ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_LSB, regs[i][1]));
		EXPECT_EQ(datasheet_mc(regs[i][0], regs[i][1]), attr(hwmon, "temp1_input"))
			TH_LOG("MSB %#04x LSB %#04x", regs[i][0], regs[i][1]);
	}
	for (i = 0; i < ARRAY_SIZE(known); i++) {
		code_to_regs(known[i].t, 7, &msb, &lsb);
		ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_MSB, msb));
		ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_LSB, lsb));
		EXPECT_EQ(known[i].mc, attr(hwmon, "temp1_input")) TH_LOG("T %#06x", known[i].t);
	}
	/* Every code from -128 to -0.03125. */
	EXPECT_EQ(0, sweep(_metadata, 0x1000, 0x1fff));
}

TEST_F(lt16, a_wrong_chip_id_makes_probe_fail)
{
	struct probe_seen seen;
	unsigned int id;

	/* Every identity but the LT16's: -ENODEV, one byte read, no write. */
	for (id = 0; id <= 0xff; id++) {
		if (id == LT16_ID)
			continue;
		ASSERT_EQ(0, seed_byte(LT16_ADDR, WHO_AM_I, id));
		tracing_clear();
		ASSERT_EQ(0, new_device("lt16", LT16_ADDR));
		EXPECT_FALSE(driver_bound(LT16_ADDR)) TH_LOG("bound with ID %#04x", id);
		ASSERT_EQ(0, probe_seen(&seen, LT16_ADDR));
		EXPECT_EQ(1, seen.returned) TH_LOG("ID %#04x", id);
		EXPECT_EQ(-ENODEV, seen.ret) TH_LOG("ID %#04x", id);
		EXPECT_EQ(1, seen.who_am_i_reads) TH_LOG("ID %#04x: WHO_AM_I not read exactly once, as a byte", id);
		/* A chip that is not ours must be left as it was. */
		EXPECT_EQ(0, seen.writes) TH_LOG("ID %#04x: %s", id, seen.first_write);
		EXPECT_EQ(0x01, peek_byte(LT16_ADDR, CONFIG));
		delete_device(LT16_ADDR);
		if (!_metadata->passed)
			break;
	}
	ASSERT_EQ(0, seed_byte(LT16_ADDR, WHO_AM_I, LT16_ID));
	tracing_clear();
	ASSERT_EQ(0, new_device("lt16", LT16_ADDR));
	EXPECT_TRUE(driver_bound(LT16_ADDR));
	ASSERT_EQ(0, probe_seen(&seen, LT16_ADDR));
	EXPECT_EQ(0, seen.ret);
}

TEST_F(lt16, the_id_is_read_with_one_byte_data_transfer)
{
	struct probe_seen seen;

	/* The cell's high byte is 0x5a: only a byte read sees 0xa5 alone. */
	tracing_clear();
	ASSERT_EQ(0, new_device("lt16", LT16_ADDR));
	ASSERT_TRUE(driver_bound(LT16_ADDR));
	ASSERT_EQ(0, probe_seen(&seen, LT16_ADDR));
	EXPECT_EQ(1, seen.who_am_i_reads);
	/* The probe reads WHO_AM_I once and nothing else: it writes CONFIG. */
	EXPECT_EQ(0, seen.other_reads);
}

TEST_F(lt16, a_chip_that_does_not_answer_fails_the_probe_with_the_bus_error)
{
	struct probe_seen seen;

	/*
	 * Nothing answers at ABSENT_ADDR: i2c-stub fails every transfer
	 * there with -ENODEV, as an adapter reports a NAK. The probe must
	 * hand that error on as it is, and not go on to write CONFIG.
	 */
	tracing_clear();
	ASSERT_EQ(0, new_device("lt16", ABSENT_ADDR));
	EXPECT_FALSE(driver_bound(ABSENT_ADDR));
	ASSERT_EQ(0, probe_seen(&seen, ABSENT_ADDR));
	EXPECT_EQ(1, seen.returned);
	EXPECT_EQ(-ENODEV, seen.ret);
	EXPECT_EQ(1, seen.reads);
	EXPECT_EQ(1, seen.who_am_i_reads);
	EXPECT_EQ(0, seen.writes) TH_LOG("%s", seen.first_write);
	delete_device(ABSENT_ADDR);
	/* The chip that does answer still probes. */
	tracing_clear();
	ASSERT_EQ(0, new_device("lt16", LT16_ADDR));
	EXPECT_TRUE(driver_bound(LT16_ADDR));
}

TEST_HARNESS_MAIN
