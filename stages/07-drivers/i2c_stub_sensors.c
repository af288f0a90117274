// SPDX-License-Identifier: GPL-2.0
/*
 * Five of the 4.10 merge window's new sensor drivers, tested with no
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
#define MPU3050_ADDR	0x68
#define HTS221_ADDR	0x5f

/* The HTS221's I2C interface sets bit 7 of the address to auto-increment. */
#define HTS221_REG(r)	(0x80 | (r))

#include <math.h>

/* An IIO attribute as a number (they are printed with up to 9 decimals). */
static double attr_double(const char *dir, const char *name)
{
	char text[64];

	attr_text(dir, name, text, sizeof(text));
	return text[0] ? strtod(text, NULL) : NAN;
}

static int write_attr(const char *dir, const char *name, const char *text)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return write_text(path, text);
}

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

/*
 * MPU-3050 (InvenSense PS-MPU-3000A): 16-bit big-endian gyro and
 * temperature words; each full-scale range of +/-250 to +/-2000 degrees/s
 * spans all 65536 codes; the temperature is 35 degrees C at -13200 and
 * rises 280 codes per degree.
 */
static const int mpu3050_ranges_dps[] = { 250, 500, 1000, 2000 };

static double mpu3050_scale_rad(int range_dps)
{
	return 2.0 * range_dps * M_PI / 180.0 / 65535.0;
}

static int seed_be16(__u16 addr, __u8 reg, __s16 value)
{
	return seed_byte(addr, reg, (__u16)value >> 8) || seed_byte(addr, reg + 1, value & 0xff);
}

TEST_F(stub, mpu3050_reports_seeded_rates_and_temperatures)
{
	static const __s16 words[][3] = {
		{ 0, 1, -1 }, { 32767, -32768, 0x1234 }, { -12345, 2000, 0x7f00 },
	};
	static const __s16 temps[] = { -13200, 0, -23000, 32767, -32768, 1234 };
	static const char * const axis[] = { "in_anglvel_x_raw", "in_anglvel_y_raw",
					     "in_anglvel_z_raw" };
	char iio[192], text[32];
	unsigned int i, a;

	ASSERT_EQ(0, system("modprobe mpu3050"));
	ASSERT_EQ(0, seed_byte(MPU3050_ADDR, 0x00, 0x68));	/* WHO_AM_I */
	ASSERT_EQ(0, new_device("mpu3050", MPU3050_ADDR));
	ASSERT_TRUE(driver_bound(MPU3050_ADDR)) TH_LOG("mpu3050 did not probe");
	ASSERT_EQ(0, iio_dir(iio, sizeof(iio), MPU3050_ADDR));
	attr_text(iio, "name", text, sizeof(text));
	EXPECT_STREQ("mpu3050", text);
	for (i = 0; i < ARRAY_SIZE(words); i++) {
		for (a = 0; a < 3; a++)
			ASSERT_EQ(0, seed_be16(MPU3050_ADDR, 0x1d + 2 * a, words[i][a]));
		for (a = 0; a < 3; a++)
			EXPECT_EQ(words[i][a], attr(iio, axis[a])) TH_LOG("set %u", i);
	}
	/* The default range is +/-2000 degrees/s, in radians per second per code. */
	EXPECT_LT(fabs(attr_double(iio, "in_anglvel_scale") / mpu3050_scale_rad(2000) - 1), 1e-5)
		TH_LOG("in_anglvel_scale %.9f, the datasheet's %.9f",
		       attr_double(iio, "in_anglvel_scale"), mpu3050_scale_rad(2000));
	/* Temperature in millidegrees after offset and scale, code by code. */
	EXPECT_EQ(23000, attr(iio, "in_temp_offset"));
	for (i = 0; i < ARRAY_SIZE(temps); i++) {
		double want = 35000 + (temps[i] + 13200) * 1000.0 / 280, got;

		ASSERT_EQ(0, seed_be16(MPU3050_ADDR, 0x1b, temps[i]));
		EXPECT_EQ(temps[i], attr(iio, "in_temp_raw")) TH_LOG("temp %d", temps[i]);
		got = (attr(iio, "in_temp_raw") + attr_double(iio, "in_temp_offset")) *
		      attr_double(iio, "in_temp_scale");
		EXPECT_LT(fabs(got - want), 0.001) TH_LOG("temp %d: %.3f, want %.3f", temps[i], got, want);
	}
	delete_device(MPU3050_ADDR);
}

TEST_F(stub, mpu3050_scales_match_the_datasheet_ranges)
{
	char iio[192], avail[160], *scale, *save;
	int range = 0;

	ASSERT_EQ(0, system("modprobe mpu3050"));
	ASSERT_EQ(0, seed_byte(MPU3050_ADDR, 0x00, 0x68));
	ASSERT_EQ(0, new_device("mpu3050", MPU3050_ADDR));
	ASSERT_TRUE(driver_bound(MPU3050_ADDR));
	ASSERT_EQ(0, iio_dir(iio, sizeof(iio), MPU3050_ADDR));
	attr_text(iio, "anglevel_scale_available", avail, sizeof(avail));
	/* Each scale the driver offers is one range; choosing it sets FS_SEL. */
	for (scale = strtok_r(avail, " ", &save); scale; scale = strtok_r(NULL, " ", &save)) {
		char now[32];

		ASSERT_GT(ARRAY_SIZE(mpu3050_ranges_dps), range) TH_LOG("more scales than ranges");
		EXPECT_LT(fabs(strtod(scale, NULL) / mpu3050_scale_rad(mpu3050_ranges_dps[range]) - 1),
			  1e-5) TH_LOG("offered %s for +/-%d", scale, mpu3050_ranges_dps[range]);
		ASSERT_EQ(0, write_attr(iio, "in_anglvel_scale", scale));
		attr_text(iio, "in_anglvel_scale", now, sizeof(now));
		EXPECT_STREQ(scale, now) TH_LOG("range +/-%d", mpu3050_ranges_dps[range]);
		/* A read programs the chip: DLPF_FS_SYNC bits 4..3 are FS_SEL. */
		attr(iio, "in_anglvel_x_raw");
		EXPECT_EQ(range, (peek_byte(MPU3050_ADDR, 0x16) >> 3) & 3) TH_LOG("%s", scale);
		range++;
	}
	EXPECT_EQ(ARRAY_SIZE(mpu3050_ranges_dps), range);
	delete_device(MPU3050_ADDR);
}

TEST_F(stub, mpu3050_checks_its_chip_id)
{
	ASSERT_EQ(0, system("modprobe mpu3050"));
	/* Bit 0 of WHO_AM_I follows the AD0 pin: both values are an MPU-3050. */
	ASSERT_EQ(0, seed_byte(MPU3050_ADDR, 0x00, 0x69));
	ASSERT_EQ(0, new_device("mpu3050", MPU3050_ADDR));
	EXPECT_TRUE(driver_bound(MPU3050_ADDR));
	delete_device(MPU3050_ADDR);
	ASSERT_EQ(0, seed_byte(MPU3050_ADDR, 0x00, 0x6a));
	ASSERT_EQ(0, new_device("mpu3050", MPU3050_ADDR));
	EXPECT_FALSE(driver_bound(MPU3050_ADDR));
	delete_device(MPU3050_ADDR);
}

/*
 * HTS221 (ST DocID026333, and its application note TN1218): two factory
 * calibration points per quantity, (H0_T0_OUT, H0_rH_x2) and
 * (H1_T0_OUT, H1_rH_x2) for humidity, (T0_OUT, T0_degC_x8) and
 * (T1_OUT, T1_degC_x8) for temperature; a reading is the straight line
 * through them. The driver reports the line as a scale and an offset.
 */
struct hts221_cal {
	__u8 h0_x2, h1_x2;
	__s16 h0_out, h1_out;
	__u16 t0_x8, t1_x8;	/* 10 bits */
	__s16 t0_out, t1_out;
};

static void seed_le16_hts(__u8 reg, __s16 value)
{
	seed_byte(HTS221_ADDR, HTS221_REG(reg), value & 0xff);
	seed_byte(HTS221_ADDR, HTS221_REG(reg + 1), (__u16)value >> 8);
}

static void seed_hts221(const struct hts221_cal *c)
{
	seed_byte(HTS221_ADDR, HTS221_REG(0x0f), 0xbc);		/* WHO_AM_I */
	seed_byte(HTS221_ADDR, HTS221_REG(0x30), c->h0_x2);
	seed_byte(HTS221_ADDR, HTS221_REG(0x31), c->h1_x2);
	seed_byte(HTS221_ADDR, HTS221_REG(0x32), c->t0_x8 & 0xff);
	seed_byte(HTS221_ADDR, HTS221_REG(0x33), c->t1_x8 & 0xff);
	seed_byte(HTS221_ADDR, HTS221_REG(0x35), (c->t0_x8 >> 8) | ((c->t1_x8 >> 8) << 2));
	seed_le16_hts(0x36, c->h0_out);
	seed_le16_hts(0x3a, c->h1_out);
	seed_le16_hts(0x3c, c->t0_out);
	seed_le16_hts(0x3e, c->t1_out);
}

static void check_hts221_channel(struct __test_metadata *_metadata, const char *iio,
				 const char *chan, __u8 out_reg, const __s16 *raws, int n,
				 double y0, double y1, double x0, double x1)
{
	char name[64];
	int i;

	for (i = 0; i < n; i++) {
		double want = y0 + (raws[i] - x0) * (y1 - y0) / (x1 - x0), got;

		seed_le16_hts(out_reg, raws[i]);
		snprintf(name, sizeof(name), "in_%s_raw", chan);
		EXPECT_EQ(raws[i], attr(iio, name)) TH_LOG("%s raw %d", chan, raws[i]);
		snprintf(name, sizeof(name), "in_%s_offset", chan);
		got = raws[i] + attr_double(iio, name);
		snprintf(name, sizeof(name), "in_%s_scale", chan);
		got *= attr_double(iio, name);
		/* The driver's unit: degrees Celsius and percent, not milli-units. */
		EXPECT_LT(fabs(got - want), 1e-6 * (1 + fabs(want)))
			TH_LOG("%s raw %d: %.6f, the calibration line says %.6f", chan, raws[i],
			       got, want);
	}
}

TEST_F(stub, hts221_follows_its_calibration_line)
{
	/* 20 %rH and 80 %rH; 20 and 40 degrees C, with T1's bit 8 in 0x35. */
	static const struct hts221_cal cal = {
		.h0_x2 = 40, .h1_x2 = 160, .h0_out = -5000, .h1_out = 7000,
		.t0_x8 = 160, .t1_x8 = 320, .t0_out = 300, .t1_out = 3500,
	};
	static const __s16 h_raws[] = { -5000, 7000, 0, 1000, -32768, 32767 };
	static const __s16 t_raws[] = { 300, 3500, 0, -1000, 32767, -32768 };
	char iio[192], text[32];

	ASSERT_EQ(0, system("modprobe hts221_i2c"));
	seed_hts221(&cal);
	ASSERT_EQ(0, new_device("hts221", HTS221_ADDR));
	ASSERT_TRUE(driver_bound(HTS221_ADDR)) TH_LOG("hts221 did not probe");
	ASSERT_EQ(0, iio_dir(iio, sizeof(iio), HTS221_ADDR));
	attr_text(iio, "name", text, sizeof(text));
	EXPECT_STREQ("hts221", text);
	/* The line through the points, in the driver's fixed point. */
	attr_text(iio, "in_humidityrelative_scale", text, sizeof(text));
	EXPECT_STREQ("0.005000000", text);
	attr_text(iio, "in_humidityrelative_offset", text, sizeof(text));
	EXPECT_STREQ("9000.000000000", text);
	attr_text(iio, "in_temp_scale", text, sizeof(text));
	EXPECT_STREQ("0.006250000", text);
	attr_text(iio, "in_temp_offset", text, sizeof(text));
	EXPECT_STREQ("2900.000000000", text);
	check_hts221_channel(_metadata, iio, "humidityrelative", 0x28, h_raws,
			     ARRAY_SIZE(h_raws), 20, 80, -5000, 7000);
	check_hts221_channel(_metadata, iio, "temp", 0x2a, t_raws, ARRAY_SIZE(t_raws),
			     20, 40, 300, 3500);
	delete_device(HTS221_ADDR);
}

TEST_F(stub, hts221_refuses_calibration_it_cannot_use)
{
	/* Blank NVM: every calibration register reads 0, as i2c-stub's do. */
	static const struct hts221_cal blank = { 0 };
	/* Two distinct points whose slope rounds to 0: the offset would divide by it. */
	static const struct hts221_cal flat = {
		.h0_x2 = 40, .h1_x2 = 40, .h0_out = 0, .h1_out = 1000,
		.t0_x8 = 160, .t1_x8 = 320, .t0_out = 300, .t1_out = 3500,
	};
	static const struct hts221_cal good = {
		.h0_x2 = 40, .h1_x2 = 160, .h0_out = -5000, .h1_out = 7000,
		.t0_x8 = 160, .t1_x8 = 320, .t0_out = 300, .t1_out = 3500,
	};

	ASSERT_EQ(0, system("modprobe hts221_i2c"));
	seed_hts221(&blank);
	ASSERT_EQ(0, new_device("hts221", HTS221_ADDR));
	EXPECT_FALSE(driver_bound(HTS221_ADDR)) TH_LOG("bound with blank calibration");
	delete_device(HTS221_ADDR);
	seed_hts221(&flat);
	ASSERT_EQ(0, new_device("hts221", HTS221_ADDR));
	EXPECT_FALSE(driver_bound(HTS221_ADDR)) TH_LOG("bound with a flat humidity line");
	delete_device(HTS221_ADDR);
	/* The same client with usable points binds: the calibration was the reason. */
	seed_hts221(&good);
	ASSERT_EQ(0, new_device("hts221", HTS221_ADDR));
	EXPECT_TRUE(driver_bound(HTS221_ADDR));
	delete_device(HTS221_ADDR);
}

TEST_HARNESS_MAIN
