// SPDX-License-Identifier: GPL-2.0
/*
 * Three of the 4.10 merge window's new sensor drivers, tested with no
 * hardware: i2c-stub plays the chip, this program seeds its registers
 * through /dev/i2c-N, instantiates the driver through new_device, and
 * checks that the values in hwmon or IIO sysfs are the ones the datasheet
 * conversion (as each driver implements it) gives for those registers.
 */
#include "i2c_stub_util.h"
#include "kselftest_harness.h"

#define TMP108_ADDR	0x48
#define DA280_ADDR	0x26
#define DA311_ADDR	0x27

/* tmp108_temp_reg_to_mC(): 12 bits left-aligned, 1/16 degree per LSB. */
static long tmp108_mc(__u16 reg)
{
	return (long)(__s16)(reg & ~0x0f) * 1000 / 256;
}

/* da280/da311_read_raw(): a signed 16-bit word, shifted right arithmetically. */
static long accel_raw(__u16 word, int shift)
{
	return (__s16)word >> shift;
}

FIXTURE(stub) {
	int unused;
};

FIXTURE_SETUP(stub)
{
	ASSERT_LE(0, stub_load()) TH_LOG("no i2c-stub adapter");
}

FIXTURE_TEARDOWN(stub)
{
}

TEST_F(stub, tmp108_reports_seeded_temperatures_in_millicelsius)
{
	static const __u16 regs[] = { 0x1900, 0x0010, 0xe700, 0xfff0, 0x7ff0, 0xc900 };
	char hwmon[192];
	unsigned int i;

	ASSERT_EQ(0, system("modprobe tmp108"));
	/* Continuous conversion at 1 Hz, the power-on default (byte-swapped in the driver's view). */
	ASSERT_EQ(0, seed_word(TMP108_ADDR, 0x01, be16_cell(0x1022)));
	ASSERT_EQ(0, new_device("tmp108", TMP108_ADDR));
	ASSERT_TRUE(driver_bound(TMP108_ADDR));
	ASSERT_EQ(0, hwmon_dir(hwmon, sizeof(hwmon), TMP108_ADDR));
	usleep(50000);	/* the driver withholds readings for its 30 ms conversion time */
	for (i = 0; i < ARRAY_SIZE(regs); i++) {
		ASSERT_EQ(0, seed_word(TMP108_ADDR, 0x00, be16_cell(regs[i])));
		EXPECT_EQ(tmp108_mc(regs[i]), attr(hwmon, "temp1_input"))
			TH_LOG("register %#06x", regs[i]);
	}
	/* Limits go through the same conversion, both ways. */
	ASSERT_EQ(0, seed_word(TMP108_ADDR, 0x02, be16_cell(0xec00)));
	EXPECT_EQ(tmp108_mc(0xec00), attr(hwmon, "temp1_min"));
	delete_device(TMP108_ADDR);
}

static void check_accel(struct __test_metadata *_metadata, const char *name, __u16 addr,
			__u8 x_reg, int shift, const char *scale)
{
	static const __u16 words[][3] = {
		{ 0x0000, 0x0010, 0xfff0 },
		{ 0x7ff0, 0x8000, 0x1230 },
		{ 0xfffc, 0x4000, 0xc000 },
	};
	static const char * const axis[] = { "in_accel_x_raw", "in_accel_y_raw", "in_accel_z_raw" };
	char iio[192], text[32];
	unsigned int i, a;

	ASSERT_EQ(0, new_device(name, addr));
	ASSERT_TRUE(driver_bound(addr)) TH_LOG("%s did not probe", name);
	ASSERT_EQ(0, iio_dir(iio, sizeof(iio), addr));
	attr_text(iio, "name", text, sizeof(text));
	EXPECT_STREQ(name, text);
	attr_text(iio, "in_accel_scale", text, sizeof(text));
	EXPECT_STREQ(scale, text);
	for (i = 0; i < ARRAY_SIZE(words); i++) {
		for (a = 0; a < 3; a++)
			ASSERT_EQ(0, seed_word(addr, x_reg + 2 * a, words[i][a]));
		for (a = 0; a < 3; a++)
			EXPECT_EQ(accel_raw(words[i][a], shift), attr(iio, axis[a]))
				TH_LOG("%s set %u", name, i);
	}
}

TEST_F(stub, da280_reads_14_bit_axes_and_powers_the_chip_up_and_down)
{
	ASSERT_EQ(0, system("modprobe da280"));
	ASSERT_EQ(0, seed_byte(DA280_ADDR, 0x01, 0x13));	/* CHIP_ID */
	check_accel(_metadata, "da280", DA280_ADDR, 0x02, 2, "0.002395019");
	EXPECT_EQ(0x1e, peek_byte(DA280_ADDR, 0x11));		/* MODE_BW: enabled */
	delete_device(DA280_ADDR);
	EXPECT_EQ(0x9e, peek_byte(DA280_ADDR, 0x11));		/* and disabled on removal */
}

TEST_F(stub, da311_reads_12_bit_axes)
{
	ASSERT_EQ(0, system("modprobe da311"));
	ASSERT_EQ(0, seed_byte(DA311_ADDR, 0x0f, 0x13));	/* CHIP_ID */
	/* The driver sets bit 7 of OUT_X_L (0x28), the chip's auto-increment flag. */
	check_accel(_metadata, "da311", DA311_ADDR, 0x28 | 0x80, 4, "0.009580078");
	delete_device(DA311_ADDR);
}

TEST_F(stub, a_wrong_chip_id_makes_probe_fail)
{
	static const struct { const char *name; __u16 addr; __u8 reg; } chips[] = {
		{ "da280", DA280_ADDR, 0x01 },
		{ "da311", DA311_ADDR, 0x0f },
	};
	char iio[192];
	unsigned int i;

	ASSERT_EQ(0, system("modprobe da280 && modprobe da311"));
	for (i = 0; i < ARRAY_SIZE(chips); i++) {
		ASSERT_EQ(0, seed_byte(chips[i].addr, chips[i].reg, 0x12));
		ASSERT_EQ(0, new_device(chips[i].name, chips[i].addr));
		EXPECT_FALSE(driver_bound(chips[i].addr)) TH_LOG("%s bound", chips[i].name);
		EXPECT_NE(0, iio_dir(iio, sizeof(iio), chips[i].addr));
		delete_device(chips[i].addr);
		/* The right ID on the same client binds: the ID was the only reason. */
		ASSERT_EQ(0, seed_byte(chips[i].addr, chips[i].reg, 0x13));
		ASSERT_EQ(0, new_device(chips[i].name, chips[i].addr));
		EXPECT_TRUE(driver_bound(chips[i].addr)) TH_LOG("%s did not bind", chips[i].name);
		delete_device(chips[i].addr);
	}
}

TEST_HARNESS_MAIN
