/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the stage's graders share: the LED class attributes in sysfs and the
 * /dev/uleds protocol, written once so that every grader speaks them alike.
 */
#ifndef LAB_ULED_HELPERS_H
#define LAB_ULED_HELPERS_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/uleds.h>

#define LEDS_DIR "/sys/class/leds"

static inline long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/*
 * Whether the LED is there with its attributes. The class link appears
 * before the attribute groups are made (device_add() links, then adds
 * them), so look for the last group's file: trigger.
 */
static inline int led_exists(const char *led)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), LEDS_DIR "/%s/trigger", led);
	return stat(path, &st) == 0;
}

/* Waits up to timeout_ms for the LED to appear; nonzero if it did. */
static inline int led_wait_for(const char *led, int timeout_ms)
{
	long long end = now_ms() + timeout_ms;

	while (!led_exists(led)) {
		if (now_ms() > end)
			return 0;
		usleep(10000);
	}
	return 1;
}

/* Writes a string to an LED attribute; 0 or -errno. */
static inline int led_write_attr(const char *led, const char *attr,
				 const char *value)
{
	char path[PATH_MAX];
	ssize_t len = strlen(value);
	int fd, ret = 0;

	snprintf(path, sizeof(path), LEDS_DIR "/%s/%s", led, attr);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	if (write(fd, value, len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

/* Reads an LED attribute into buf without its newline; 0 or -errno. */
static inline int led_read_attr(const char *led, const char *attr, char *buf,
				size_t size)
{
	char path[PATH_MAX];
	ssize_t len;
	int fd;

	snprintf(path, sizeof(path), LEDS_DIR "/%s/%s", led, attr);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	len = read(fd, buf, size - 1);
	close(fd);
	if (len < 0)
		return -errno;
	buf[len] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static inline int led_set_brightness(const char *led, int value)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%d", value);
	return led_write_attr(led, "brightness", buf);
}

/* Opens /dev/uleds and registers an LED; the fd, or -errno. */
static inline int uled_create(const char *name, int max_brightness)
{
	struct uleds_user_dev dev = { .max_brightness = max_brightness };
	int fd, saved;

	snprintf(dev.name, sizeof(dev.name), "%s", name);
	fd = open("/dev/uleds", O_RDWR);
	if (fd < 0)
		return -errno;
	if (write(fd, &dev, sizeof(dev)) != sizeof(dev)) {
		saved = errno;
		close(fd);
		return -saved;
	}
	return fd;
}

/*
 * The next brightness report within timeout_ms: the value, -ETIME when
 * none came, or -errno.
 */
static inline int uled_next(int fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int brightness, ret;

	ret = poll(&pfd, 1, timeout_ms);
	if (ret < 0)
		return -errno;
	if (ret == 0)
		return -ETIME;
	if (read(fd, &brightness, sizeof(brightness)) != sizeof(brightness))
		return -EPROTO;
	return brightness;
}

#endif
