/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for tests that play an I2C chip with i2c-stub: seed and peek its
 * registers through /dev/i2c-N, instantiate and remove clients through
 * new_device and delete_device, and find their hwmon and IIO directories.
 */
#ifndef I2C_STUB_UTIL_H
#define I2C_STUB_UTIL_H

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

static int stub_bus = -1;


static inline int smbus(int fd, char rw, __u8 reg, int size, union i2c_smbus_data *data)
{
	struct i2c_smbus_ioctl_data args = {
		.read_write = rw, .command = reg, .size = size, .data = data,
	};

	return ioctl(fd, I2C_SMBUS, &args) ? -errno : 0;
}

/* A file descriptor talking to @addr on the stub bus, even while a driver owns it. */
static inline int stub_open(__u16 addr)
{
	char path[32];
	int fd;

	snprintf(path, sizeof(path), "/dev/i2c-%d", stub_bus);
	fd = open(path, O_RDWR);
	if (fd < 0 || ioctl(fd, I2C_SLAVE_FORCE, addr))
		return -1;
	return fd;
}

static inline int seed_byte(__u16 addr, __u8 reg, __u8 value)
{
	union i2c_smbus_data data = { .byte = value };
	int fd = stub_open(addr), ret;

	ret = smbus(fd, I2C_SMBUS_WRITE, reg, I2C_SMBUS_BYTE_DATA, &data);
	close(fd);
	return ret;
}

/* i2c-stub keeps one 16-bit cell per register; a word write fills it. */
static inline int seed_word(__u16 addr, __u8 reg, __u16 value)
{
	union i2c_smbus_data data = { .word = value };
	int fd = stub_open(addr), ret;

	ret = smbus(fd, I2C_SMBUS_WRITE, reg, I2C_SMBUS_WORD_DATA, &data);
	close(fd);
	return ret;
}

static inline int peek_byte(__u16 addr, __u8 reg)
{
	union i2c_smbus_data data;
	int fd = stub_open(addr), ret;

	ret = smbus(fd, I2C_SMBUS_READ, reg, I2C_SMBUS_BYTE_DATA, &data);
	close(fd);
	return ret ? ret : data.byte;
}

/* SMBus words travel little-endian; a big-endian chip register is swapped. */
static inline __u16 be16_cell(__u16 value)
{
	return (value >> 8) | (value << 8);
}

static inline int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static inline int read_text(const char *path, char *buf, size_t len)
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

static inline long read_long(const char *path)
{
	char text[64];

	return read_text(path, text, sizeof(text)) ? -99999999 : strtol(text, NULL, 10);
}

static inline int new_device(const char *name, __u16 addr)
{
	char path[64], text[32];

	snprintf(path, sizeof(path), "/sys/bus/i2c/devices/i2c-%d/new_device", stub_bus);
	snprintf(text, sizeof(text), "%s 0x%02x", name, addr);
	return write_text(path, text);
}

static inline void delete_device(__u16 addr)
{
	char path[64], text[16];

	snprintf(path, sizeof(path), "/sys/bus/i2c/devices/i2c-%d/delete_device", stub_bus);
	snprintf(text, sizeof(text), "0x%02x", addr);
	write_text(path, text);
}

static inline int client_dir(char *path, size_t len, __u16 addr)
{
	return snprintf(path, len, "/sys/bus/i2c/devices/%d-%04x", stub_bus, addr);
}

static inline int driver_bound(__u16 addr)
{
	char path[96];

	client_dir(path, sizeof(path), addr);
	strcat(path, "/driver");
	return access(path, F_OK) == 0;
}

/* The first entry of the client's directory (or subdirectory) whose name starts with @prefix. */
static inline int find_child(char *out, int len, const char *dir, const char *prefix)
{
	struct dirent *entry;
	DIR *d = opendir(dir);
	int found = -ENOENT;

	if (!d)
		return -errno;
	while ((entry = readdir(d)))
		if (!strncmp(entry->d_name, prefix, strlen(prefix))) {
			found = snprintf(out, len, "%s/%s", dir, entry->d_name) < len ?
				0 : -ENAMETOOLONG;
			break;
		}
	closedir(d);
	return found;
}

static inline int iio_dir(char *out, size_t len, __u16 addr)
{
	char dir[96];

	client_dir(dir, sizeof(dir), addr);
	return find_child(out, len, dir, "iio:device");
}

static inline int hwmon_dir(char *out, size_t len, __u16 addr)
{
	char dir[128];

	client_dir(dir, sizeof(dir), addr);
	strcat(dir, "/hwmon");
	return find_child(out, len, dir, "hwmon");
}

static inline long attr(const char *dir, const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return read_long(path);
}

static inline void attr_text(const char *dir, const char *name, char *buf, size_t len)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (read_text(path, buf, len))
		buf[0] = '\0';
}

/*
 * i2c-stub takes its chip addresses once, when it is loaded, so every test
 * program of the stage asks for all of them: tmp108, da280, da311, lt16,
 * mpu3050 and hts221. No chip answers at any other address.
 */
#define STUB_CHIP_ADDRS	"0x48,0x26,0x27,0x4c,0x68,0x5f"

/* Load i2c-stub and find its bus number. */
static inline int stub_load(void)
{
	char command[96], name[64], path[512];
	struct dirent *entry;
	DIR *d;

	if (stub_bus >= 0)
		return stub_bus;
	snprintf(command, sizeof(command), "modprobe i2c-stub chip_addr=%s", STUB_CHIP_ADDRS);
	if (system(command))
		return -ENOENT;
	d = opendir("/sys/bus/i2c/devices");
	if (!d)
		return -errno;
	while ((entry = readdir(d))) {
		if (strncmp(entry->d_name, "i2c-", 4))
			continue;
		snprintf(path, sizeof(path), "/sys/bus/i2c/devices/%s/name", entry->d_name);
		if (!read_text(path, name, sizeof(name)) && strstr(name, "stub"))
			stub_bus = atoi(entry->d_name + 4);
	}
	closedir(d);
	return stub_bus;
}

#endif /* I2C_STUB_UTIL_H */
