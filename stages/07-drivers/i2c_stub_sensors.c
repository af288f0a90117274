// SPDX-License-Identifier: GPL-2.0
/*
 * Three of the 4.10 merge window's new sensor drivers, tested with no
 * hardware: i2c-stub plays the chip, this program seeds its registers
 * through /dev/i2c-N, instantiates the driver through new_device, and
 * checks that the values in hwmon or IIO sysfs are the ones the datasheet
 * conversion (as each driver implements it) gives for those registers.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/i2c.h>
#include <linux/i2c-dev.h>

#include "kselftest_harness.h"

#define TMP108_ADDR	0x48
#define DA280_ADDR	0x26
#define DA311_ADDR	0x27

static int stub_bus = -1;

static int smbus(int fd, char rw, __u8 reg, int size, union i2c_smbus_data *data)
{
	struct i2c_smbus_ioctl_data args = {
		.read_write = rw, .command = reg, .size = size, .data = data,
	};

	return ioctl(fd, I2C_SMBUS, &args) ? -errno : 0;
}

/* A file descriptor talking to @addr on the stub bus, even while a driver owns it. */
static int stub_open(__u16 addr)
{
	char path[32];
	int fd;

	snprintf(path, sizeof(path), "/dev/i2c-%d", stub_bus);
	fd = open(path, O_RDWR);
	if (fd < 0 || ioctl(fd, I2C_SLAVE_FORCE, addr))
		return -1;
	return fd;
}

static int seed_byte(__u16 addr, __u8 reg, __u8 value)
{
	union i2c_smbus_data data = { .byte = value };
	int fd = stub_open(addr), ret;

	ret = smbus(fd, I2C_SMBUS_WRITE, reg, I2C_SMBUS_BYTE_DATA, &data);
	close(fd);
	return ret;
}

/* i2c-stub keeps one 16-bit cell per register; a word write fills it. */
static int seed_word(__u16 addr, __u8 reg, __u16 value)
{
	union i2c_smbus_data data = { .word = value };
	int fd = stub_open(addr), ret;

	ret = smbus(fd, I2C_SMBUS_WRITE, reg, I2C_SMBUS_WORD_DATA, &data);
	close(fd);
	return ret;
}

static int peek_byte(__u16 addr, __u8 reg)
{
	union i2c_smbus_data data;
	int fd = stub_open(addr), ret;

	ret = smbus(fd, I2C_SMBUS_READ, reg, I2C_SMBUS_BYTE_DATA, &data);
	close(fd);
	return ret ? ret : data.byte;
}

/* SMBus words travel little-endian; a big-endian chip register is swapped. */
static __u16 be16_cell(__u16 value)
{
	return (value >> 8) | (value << 8);
}

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static int read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t done;

	if (fd < 0)
		return -errno;
	done = read(fd, buf, len - 1);
	close(fd);
	if (done < 0)
		return -errno;
	buf[done] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static long read_long(const char *path)
{
	char text[64];

	return read_text(path, text, sizeof(text)) ? -99999999 : strtol(text, NULL, 10);
}

static int new_device(const char *name, __u16 addr)
{
	char path[64], text[32];

	snprintf(path, sizeof(path), "/sys/bus/i2c/devices/i2c-%d/new_device", stub_bus);
	snprintf(text, sizeof(text), "%s 0x%02x", name, addr);
	return write_text(path, text);
}

static void delete_device(__u16 addr)
{
	char path[64], text[16];

	snprintf(path, sizeof(path), "/sys/bus/i2c/devices/i2c-%d/delete_device", stub_bus);
	snprintf(text, sizeof(text), "0x%02x", addr);
	write_text(path, text);
}

static int client_dir(char *path, size_t len, __u16 addr)
{
	return snprintf(path, len, "/sys/bus/i2c/devices/%d-%04x", stub_bus, addr);
}

static int driver_bound(__u16 addr)
{
	char path[96];

	client_dir(path, sizeof(path), addr);
	strcat(path, "/driver");
	return access(path, F_OK) == 0;
}

/* The first entry of the client's directory (or subdirectory) whose name starts with @prefix. */
static int find_child(char *out, int len, const char *dir, const char *prefix)
{
	struct dirent *entry;
	DIR *d = opendir(dir);
	int found = -ENOENT;

	if (!d)
		return -errno;
	while ((entry = readdir(d)))
		if (!strncmp(entry->d_name, prefix, strlen(prefix))) {
			snprintf(out, len, "%s/%.*s", dir, len / 2, entry->d_name);
			found = 0;
			break;
		}
	closedir(d);
	return found;
}

static int iio_dir(char *out, size_t len, __u16 addr)
{
	char dir[96];

	client_dir(dir, sizeof(dir), addr);
	return find_child(out, len, dir, "iio:device");
}

static int hwmon_dir(char *out, size_t len, __u16 addr)
{
	char dir[128];

	client_dir(dir, sizeof(dir), addr);
	strcat(dir, "/hwmon");
	return find_child(out, len, dir, "hwmon");
}

static long attr(const char *dir, const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return read_long(path);
}

static void attr_text(const char *dir, const char *name, char *buf, size_t len)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (read_text(path, buf, len))
		buf[0] = '\0';
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
	char name[64], path[512];
	struct dirent *entry;
	DIR *d;

	if (stub_bus >= 0)
		return;
	ASSERT_EQ(0, system("modprobe i2c-stub chip_addr=0x48,0x26,0x27"));
	ASSERT_EQ(0, system("modprobe i2c-dev 2>/dev/null; true"));
	d = opendir("/sys/bus/i2c/devices");
	ASSERT_NE(NULL, d);
	while ((entry = readdir(d))) {
		if (strncmp(entry->d_name, "i2c-", 4))
			continue;
		snprintf(path, sizeof(path), "/sys/bus/i2c/devices/%s/name", entry->d_name);
		if (!read_text(path, name, sizeof(name)) && strstr(name, "stub"))
			stub_bus = atoi(entry->d_name + 4);
	}
	closedir(d);
	ASSERT_LE(0, stub_bus) TH_LOG("no i2c-stub adapter");
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
