// SPDX-License-Identifier: GPL-2.0
/*
 * Grade the LT16 driver (drivers/hwmon/lt16.c) against its datasheet,
 * exercises/07-drivers/README.md: i2c-stub plays the chip, the test seeds
 * its registers and checks temp1_input against the datasheet's conversion,
 * computed here independently of the driver.
 */
#include "i2c_stub_util.h"
#include "kselftest_harness.h"

#define LT16_ADDR	0x4c
#define WHO_AM_I	0x00
#define CONFIG		0x01
#define TEMP_MSB	0x02
#define TEMP_LSB	0x03

/* Datasheet section 3: 13-bit two's complement, 1/32 degree per step. */
static long datasheet_mc(__u8 msb, __u8 lsb)
{
	int raw = (msb << 5) | (lsb >> 3);

	if (raw & 0x1000)
		raw -= 0x2000;
	return raw * 1000L / 32;
}

static void check_temps(struct __test_metadata *_metadata, const __u8 (*regs)[2], int n)
{
	char hwmon[192];
	int i;

	ASSERT_EQ(0, hwmon_dir(hwmon, sizeof(hwmon), LT16_ADDR)) TH_LOG("no hwmon device");
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_MSB, regs[i][0]));
		ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_LSB, regs[i][1]));
		EXPECT_EQ(datasheet_mc(regs[i][0], regs[i][1]), attr(hwmon, "temp1_input"))
			TH_LOG("MSB %#04x LSB %#04x", regs[i][0], regs[i][1]);
	}
}

FIXTURE(lt16) {
	int unused;
};

FIXTURE_SETUP(lt16)
{
	ASSERT_LE(0, stub_load()) TH_LOG("no i2c-stub adapter");
	ASSERT_EQ(0, system("modprobe lt16"));
	/* Power-on state: shut down, temperature 0. */
	ASSERT_EQ(0, seed_byte(LT16_ADDR, CONFIG, 0x01));
	ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_MSB, 0));
	ASSERT_EQ(0, seed_byte(LT16_ADDR, TEMP_LSB, 0));
	ASSERT_EQ(0, seed_byte(LT16_ADDR, WHO_AM_I, 0xa5));
}

FIXTURE_TEARDOWN(lt16)
{
	delete_device(LT16_ADDR);
}

TEST_F(lt16, probe_starts_conversions_and_removal_stops_them)
{
	ASSERT_EQ(0, new_device("lt16", LT16_ADDR));
	ASSERT_TRUE(driver_bound(LT16_ADDR));
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
		{ 0x01, 0xa8 },	/* 1.65625: bits from both registers */
	};

	ASSERT_EQ(0, new_device("lt16", LT16_ADDR));
	check_temps(_metadata, regs, ARRAY_SIZE(regs));
}

TEST_F(lt16, negative_temperatures_are_sign_extended_from_13_bits)
{
	static const __u8 regs[][2] = {
		{ 0xff, 0xf8 },	/* one step below 0 */
		{ 0xd8, 0x00 },	/* -40 */
		{ 0xfe, 0x70 },	/* -3.0625: bits from both registers */
		{ 0x80, 0x00 },	/* the bottom of the range, -128 */
		{ 0x80, 0x08 },
	};

	ASSERT_EQ(0, new_device("lt16", LT16_ADDR));
	check_temps(_metadata, regs, ARRAY_SIZE(regs));
}

TEST_F(lt16, a_wrong_chip_id_makes_probe_fail)
{
	static const __u8 wrong[] = { 0x00, 0xa4, 0x5a, 0xff };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(wrong); i++) {
		ASSERT_EQ(0, seed_byte(LT16_ADDR, WHO_AM_I, wrong[i]));
		ASSERT_EQ(0, new_device("lt16", LT16_ADDR));
		EXPECT_FALSE(driver_bound(LT16_ADDR)) TH_LOG("bound with ID %#04x", wrong[i]);
		/* A chip that is not ours must be left as it was. */
		EXPECT_EQ(0x01, peek_byte(LT16_ADDR, CONFIG));
		delete_device(LT16_ADDR);
	}
	ASSERT_EQ(0, seed_byte(LT16_ADDR, WHO_AM_I, 0xa5));
	ASSERT_EQ(0, new_device("lt16", LT16_ADDR));
	EXPECT_TRUE(driver_bound(LT16_ADDR));
}

TEST_HARNESS_MAIN
