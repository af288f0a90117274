/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What stage 10's guest tests share: bpf(2) without libbpf, programs
 * written as raw instructions, array maps, BPF_PROG_ATTACH, DETACH and
 * QUERY on cgroup directories, a cgroup2 tree of the test's own, and UDP
 * sockets that belong to a chosen cgroup.
 *
 * The tests talk to the kernel through the system call only, so that
 * what they grade is the kernel's answer and not a library's idea of it:
 * libbpf retries, probes features and rewrites errors on the way.
 *
 * A socket belongs to the cgroup its creator was in when socket() ran
 * (cgroup_sk_alloc() in kernel/cgroup/cgroup.c); moving the task later
 * does not move the socket. cg_udp_socket_in() relies on that: it joins
 * a cgroup, makes the socket and goes home again.
 */
#ifndef CGROUP_BPF_H
#define CGROUP_BPF_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <poll.h>
#include <linux/bpf.h>

/* The attach types and modes, as the tests name them. */
#define EGRESS		BPF_CGROUP_INET_EGRESS
#define INGRESS		BPF_CGROUP_INET_INGRESS
#define MULTI		BPF_F_ALLOW_MULTI
#define OVERRIDE	BPF_F_ALLOW_OVERRIDE
#define NONE		0

/* Instructions, spelled as the kernel's include/linux/filter.h does. */

#define BPF_ALU64_IMM(OP, DST, IMM)				\
	((struct bpf_insn) {					\
		.code  = BPF_ALU64 | BPF_OP(OP) | BPF_K,	\
		.dst_reg = DST,					\
		.src_reg = 0,					\
		.off   = 0,					\
		.imm   = IMM })

#define BPF_ALU64_REG(OP, DST, SRC)				\
	((struct bpf_insn) {					\
		.code  = BPF_ALU64 | BPF_OP(OP) | BPF_X,	\
		.dst_reg = DST,					\
		.src_reg = SRC,					\
		.off   = 0,					\
		.imm   = 0 })

#define BPF_MOV64_REG(DST, SRC)					\
	((struct bpf_insn) {					\
		.code  = BPF_ALU64 | BPF_MOV | BPF_X,		\
		.dst_reg = DST,					\
		.src_reg = SRC,					\
		.off   = 0,					\
		.imm   = 0 })

#define BPF_MOV64_IMM(DST, IMM)					\
	((struct bpf_insn) {					\
		.code  = BPF_ALU64 | BPF_MOV | BPF_K,		\
		.dst_reg = DST,					\
		.src_reg = 0,					\
		.off   = 0,					\
		.imm   = IMM })

/* A 64-bit immediate takes two instructions; this is the first. */
#define BPF_LD_IMM64_RAW_LO(DST, SRC, IMM)			\
	((struct bpf_insn) {					\
		.code  = BPF_LD | BPF_DW | BPF_IMM,		\
		.dst_reg = DST,					\
		.src_reg = SRC,					\
		.off   = 0,					\
		.imm   = (__u32)(IMM) })

#define BPF_LD_IMM64_RAW_HI(IMM)				\
	((struct bpf_insn) {					\
		.code  = 0,					\
		.dst_reg = 0,					\
		.src_reg = 0,					\
		.off   = 0,					\
		.imm   = (__u32)((__u64)(IMM) >> 32) })

#define BPF_LDX_MEM(SIZE, DST, SRC, OFF)			\
	((struct bpf_insn) {					\
		.code  = BPF_LDX | BPF_SIZE(SIZE) | BPF_MEM,	\
		.dst_reg = DST,					\
		.src_reg = SRC,					\
		.off   = OFF,					\
		.imm   = 0 })

#define BPF_STX_MEM(SIZE, DST, SRC, OFF)			\
	((struct bpf_insn) {					\
		.code  = BPF_STX | BPF_SIZE(SIZE) | BPF_MEM,	\
		.dst_reg = DST,					\
		.src_reg = SRC,					\
		.off   = OFF,					\
		.imm   = 0 })

#define BPF_ST_MEM(SIZE, DST, OFF, IMM)				\
	((struct bpf_insn) {					\
		.code  = BPF_ST | BPF_SIZE(SIZE) | BPF_MEM,	\
		.dst_reg = DST,					\
		.src_reg = 0,					\
		.off   = OFF,					\
		.imm   = IMM })

/* *(SIZE *)(DST + OFF) OP= SRC, atomically; with BPF_FETCH, SRC = old. */
#define BPF_ATOMIC_OP(SIZE, OP, DST, SRC, OFF)			\
	((struct bpf_insn) {					\
		.code  = BPF_STX | BPF_SIZE(SIZE) | BPF_ATOMIC,	\
		.dst_reg = DST,					\
		.src_reg = SRC,					\
		.off   = OFF,					\
		.imm   = OP })

#define BPF_JMP_IMM(OP, DST, IMM, OFF)				\
	((struct bpf_insn) {					\
		.code  = BPF_JMP | BPF_OP(OP) | BPF_K,		\
		.dst_reg = DST,					\
		.src_reg = 0,					\
		.off   = OFF,					\
		.imm   = IMM })

#define BPF_JMP_REG(OP, DST, SRC, OFF)				\
	((struct bpf_insn) {					\
		.code  = BPF_JMP | BPF_OP(OP) | BPF_X,		\
		.dst_reg = DST,					\
		.src_reg = SRC,					\
		.off   = OFF,					\
		.imm   = 0 })

#define BPF_EMIT_CALL(FUNC)					\
	((struct bpf_insn) {					\
		.code  = BPF_JMP | BPF_CALL,			\
		.dst_reg = 0,					\
		.src_reg = 0,					\
		.off   = 0,					\
		.imm   = FUNC })

#define BPF_EXIT_INSN()						\
	((struct bpf_insn) {					\
		.code  = BPF_JMP | BPF_EXIT,			\
		.dst_reg = 0,					\
		.src_reg = 0,					\
		.off   = 0,					\
		.imm   = 0 })

/* The verdicts of a CGROUP_SKB program (kernel/bpf/cgroup.c:1427-1431). */
#define CG_DROP		0
#define CG_PASS		1
#define CG_DROP_CN	2	/* egress-typed programs only */
#define CG_PASS_CN	3	/* egress-typed programs only */

static inline int sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/* 0, or -errno: the tests compare against -EPERM and the like. */
static inline int sys_bpf_err(int cmd, union bpf_attr *attr)
{
	return sys_bpf(cmd, attr) < 0 ? -errno : 0;
}

/*
 * A program under construction. Lookups that find nothing jump to the
 * program's end, whose target is known only when cg_emit_exit() writes
 * it: their indexes wait in @pending until then.
 */
#define CG_PROG_MAX	64
#define CG_PROG_JUMPS	8

struct cg_prog {
	struct bpf_insn insn[CG_PROG_MAX];
	unsigned int len;
	unsigned int pending[CG_PROG_JUMPS];
	unsigned int npending;
};

static inline void cg_emit(struct cg_prog *p, struct bpf_insn insn)
{
	if (p->len == CG_PROG_MAX) {
		fprintf(stderr, "program longer than %d instructions\n",
			CG_PROG_MAX);
		abort();
	}
	p->insn[p->len++] = insn;
}

static inline void cg_emit_jump_to_exit(struct cg_prog *p,
					struct bpf_insn insn)
{
	if (p->npending == CG_PROG_JUMPS) {
		fprintf(stderr, "program with more than %d exits\n",
			CG_PROG_JUMPS);
		abort();
	}
	p->pending[p->npending++] = p->len;
	cg_emit(p, insn);
}

static inline void cg_emit_map_fd(struct cg_prog *p, int reg, int map_fd)
{
	cg_emit(p, BPF_LD_IMM64_RAW_LO(reg, BPF_PSEUDO_MAP_FD, map_fd));
	cg_emit(p, BPF_LD_IMM64_RAW_HI(0));
}

/*
 * r0 = the value of the key at fp-4 in map_fd, or on to the exit if
 * there is none. Clobbers r1-r5, as every helper call does.
 */
static inline void cg_emit_lookup_at_fp4(struct cg_prog *p, int map_fd)
{
	cg_emit(p, BPF_MOV64_REG(BPF_REG_2, BPF_REG_10));
	cg_emit(p, BPF_ALU64_IMM(BPF_ADD, BPF_REG_2, -4));
	cg_emit_map_fd(p, BPF_REG_1, map_fd);
	cg_emit(p, BPF_EMIT_CALL(BPF_FUNC_map_lookup_elem));
	cg_emit_jump_to_exit(p, BPF_JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 0));
}

/* r0 = &map[key]. */
static inline void cg_emit_lookup(struct cg_prog *p, int map_fd, __u32 key)
{
	cg_emit(p, BPF_ST_MEM(BPF_W, BPF_REG_10, -4, key));
	cg_emit_lookup_at_fp4(p, map_fd);
}

/* r0 = &map[the CPU the program runs on]. */
static inline void cg_emit_lookup_cpu(struct cg_prog *p, int map_fd)
{
	cg_emit(p, BPF_EMIT_CALL(BPF_FUNC_get_smp_processor_id));
	cg_emit(p, BPF_STX_MEM(BPF_W, BPF_REG_10, BPF_REG_0, -4));
	cg_emit_lookup_at_fp4(p, map_fd);
}

/* *(u64 *)(r0 + off) += 1, atomically: every CPU may run the program. */
static inline void cg_emit_count_at_r0(struct cg_prog *p, short off)
{
	cg_emit(p, BPF_MOV64_IMM(BPF_REG_1, 1));
	cg_emit(p, BPF_ATOMIC_OP(BPF_DW, BPF_ADD, BPF_REG_0, BPF_REG_1, off));
}

/* The end: every pending jump lands here, and the program returns verdict. */
static inline void cg_emit_exit(struct cg_prog *p, int verdict)
{
	unsigned int i;

	for (i = 0; i < p->npending; i++)
		p->insn[p->pending[i]].off = p->len - p->pending[i] - 1;
	p->npending = 0;
	cg_emit(p, BPF_MOV64_IMM(BPF_REG_0, verdict));
	cg_emit(p, BPF_EXIT_INSN());
}

/* return verdict; */
static inline void cg_prog_verdict(struct cg_prog *p, int verdict)
{
	memset(p, 0, sizeof(*p));
	cg_emit_exit(p, verdict);
}

/* map[key] += 1 at byte off of the value; return verdict; */
static inline void cg_prog_count(struct cg_prog *p, int map_fd, __u32 key,
				 short off, int verdict)
{
	memset(p, 0, sizeof(*p));
	cg_emit_lookup(p, map_fd, key);
	cg_emit_count_at_r0(p, off);
	cg_emit_exit(p, verdict);
}

/* map[this CPU] += 1 at byte off of the value; return verdict; */
static inline void cg_prog_count_cpu(struct cg_prog *p, int map_fd,
				     short off, int verdict)
{
	memset(p, 0, sizeof(*p));
	cg_emit_lookup_cpu(p, map_fd);
	cg_emit_count_at_r0(p, off);
	cg_emit_exit(p, verdict);
}

/* The verifier's account of the last refused load, for the test's log. */
static char cg_verifier_log[65536];

/*
 * A BPF_PROG_TYPE_CGROUP_SKB program: an fd, or -errno. expected is
 * the load's expected_attach_type; 0 is BPF_CGROUP_INET_INGRESS, which
 * is what a loader that does not set it asks for.
 */
static inline int cg_prog_load(const struct cg_prog *p, const char *name,
			       enum bpf_attach_type expected)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_CGROUP_SKB;
	attr.expected_attach_type = expected;
	attr.insns = (__u64)(unsigned long)p->insn;
	attr.insn_cnt = p->len;
	attr.license = (__u64)(unsigned long)"GPL";
	attr.log_buf = (__u64)(unsigned long)cg_verifier_log;
	attr.log_size = sizeof(cg_verifier_log);
	attr.log_level = 1;
	strncpy(attr.prog_name, name, sizeof(attr.prog_name) - 1);
	cg_verifier_log[0] = '\0';
	fd = sys_bpf(BPF_PROG_LOAD, &attr);
	return fd < 0 ? -errno : fd;
}

/* The id BPF_PROG_QUERY reports for the program behind fd, or 0. */
static inline __u32 cg_prog_id(int prog_fd)
{
	struct bpf_prog_info info;
	union bpf_attr attr;

	memset(&info, 0, sizeof(info));
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = prog_fd;
	attr.info.info_len = sizeof(info);
	attr.info.info = (__u64)(unsigned long)&info;
	if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr))
		return 0;
	return info.id;
}

/* An array map of max_entries values of value_size bytes: fd or -errno. */
static inline int cg_map_create(__u32 value_size, __u32 max_entries)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = sizeof(__u32);
	attr.value_size = value_size;
	attr.max_entries = max_entries;
	fd = sys_bpf(BPF_MAP_CREATE, &attr);
	return fd < 0 ? -errno : fd;
}

/* The value at key, whatever the key's size: 0 or -errno. */
static inline int cg_map_lookup(int map_fd, const void *key, void *value)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = map_fd;
	attr.key = (__u64)(unsigned long)key;
	attr.value = (__u64)(unsigned long)value;
	return sys_bpf_err(BPF_MAP_LOOKUP_ELEM, &attr);
}

static inline int cg_map_get(int map_fd, __u32 key, void *value)
{
	return cg_map_lookup(map_fd, &key, value);
}

static inline int cg_map_set(int map_fd, __u32 key, const void *value)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = map_fd;
	attr.key = (__u64)(unsigned long)&key;
	attr.value = (__u64)(unsigned long)value;
	attr.flags = BPF_ANY;
	return sys_bpf_err(BPF_MAP_UPDATE_ELEM, &attr);
}

/* The u64 at key, or -1 if it cannot be read: no count is ever -1 here. */
static inline long long cg_map_u64(int map_fd, __u32 key)
{
	__u64 value;

	if (cg_map_get(map_fd, key, &value))
		return -1;
	return value;
}

static inline int cg_attach(int cg_fd, int prog_fd, enum bpf_attach_type type,
			    __u32 flags)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.target_fd = cg_fd;
	attr.attach_bpf_fd = prog_fd;
	attr.attach_type = type;
	attr.attach_flags = flags;
	return sys_bpf_err(BPF_PROG_ATTACH, &attr);
}

static inline int cg_detach(int cg_fd, int prog_fd, enum bpf_attach_type type)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.target_fd = cg_fd;
	attr.attach_bpf_fd = prog_fd;
	attr.attach_type = type;
	return sys_bpf_err(BPF_PROG_DETACH, &attr);
}

/*
 * BPF_PROG_QUERY: up to *cnt ids into ids; on return *cnt is how many
 * the kernel has, and *attach_flags (if asked for) the cgroup's flags.
 * 0 or -errno (-ENOSPC when ids was too short).
 */
static inline int cg_query(int cg_fd, enum bpf_attach_type type,
			   __u32 query_flags, __u32 *ids, __u32 *cnt,
			   __u32 *attach_flags)
{
	union bpf_attr attr;
	int ret;

	memset(&attr, 0, sizeof(attr));
	attr.query.target_fd = cg_fd;
	attr.query.attach_type = type;
	attr.query.query_flags = query_flags;
	attr.query.prog_ids = (__u64)(unsigned long)ids;
	attr.query.prog_cnt = *cnt;
	ret = sys_bpf_err(BPF_PROG_QUERY, &attr);
	*cnt = attr.query.prog_cnt;
	if (attach_flags)
		*attach_flags = attr.query.attach_flags;
	return ret;
}

/*
 * The test's own cgroup2 tree: base is a directory of its own under the
 * cgroup2 mount (mounted on a temporary directory if the system has
 * none), home the cgroup the test started in, to which it returns after
 * making a socket elsewhere. Directories made with cg_mkdir() are
 * removed in reverse order by cg_fs_cleanup(); a cgroup's programs go
 * with it (cgroup_bpf_release()), so nothing outlives the test.
 */
#define CG_PATH_MAX	256
#define CG_MAX_DIRS	24

struct cg_fs {
	char mount[CG_PATH_MAX];
	char home[CG_PATH_MAX];
	char base[CG_PATH_MAX];
	char made[CG_MAX_DIRS][CG_PATH_MAX];
	int nmade;
	bool mounted;
};

static inline int cg_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t len = strlen(text);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

/* Moves the whole process into the cgroup at path. */
static inline int cg_join(const char *path)
{
	char procs[CG_PATH_MAX + 16], pid[16];

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", path);
	snprintf(pid, sizeof(pid), "%d", getpid());
	return cg_write(procs, pid);
}

static inline int cg_find_mount(struct cg_fs *fs)
{
	char dev[256], dir[CG_PATH_MAX], type[64];
	FILE *mounts = fopen("/proc/mounts", "r");
	int found = 0;

	if (!mounts)
		return -errno;
	while (!found && fscanf(mounts, "%255s %255s %63s %*[^\n]",
				dev, dir, type) == 3) {
		if (!strcmp(type, "cgroup2")) {
			strcpy(fs->mount, dir);
			found = 1;
		}
	}
	fclose(mounts);
	return found ? 0 : -ENOENT;
}

/* The cgroup2 path of this process: "0::/path" in /proc/self/cgroup. */
static inline int cg_find_home(struct cg_fs *fs)
{
	char line[CG_PATH_MAX];
	FILE *file = fopen("/proc/self/cgroup", "r");
	int ret = -ENOENT;

	if (!file)
		return -errno;
	while (fgets(line, sizeof(line), file)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line + 3, "/"))
			snprintf(fs->home, sizeof(fs->home), "%s", fs->mount);
		else
			snprintf(fs->home, sizeof(fs->home), "%s%s",
				 fs->mount, line + 3);
		ret = 0;
		break;
	}
	fclose(file);
	return ret;
}

/* Makes base/rel (rel may be "") and remembers it for the cleanup. */
static inline int cg_mkdir(struct cg_fs *fs, const char *rel, char *path)
{
	char made[CG_PATH_MAX];

	if (fs->nmade == CG_MAX_DIRS)
		return -ENOSPC;
	if (snprintf(made, sizeof(made), "%s%s%s", fs->base, *rel ? "/" : "",
		     rel) >= (int)sizeof(made))
		return -ENAMETOOLONG;
	if (mkdir(made, 0755))
		return -errno;
	strcpy(fs->made[fs->nmade++], made);
	if (path)
		strcpy(path, made);
	return 0;
}

static inline int cg_fs_setup(struct cg_fs *fs, const char *name)
{
	int ret;

	memset(fs, 0, sizeof(*fs));
	if (cg_find_mount(fs)) {
		strcpy(fs->mount, "/tmp/cgroup-bpf.XXXXXX");
		if (!mkdtemp(fs->mount))
			return -errno;
		if (mount("cgroup2", fs->mount, "cgroup2", 0, NULL)) {
			ret = -errno;
			rmdir(fs->mount);
			return ret;
		}
		fs->mounted = true;
	}
	ret = cg_find_home(fs);
	if (ret)
		return ret;
	snprintf(fs->base, sizeof(fs->base), "%s/%s-%d", fs->mount, name,
		 getpid());
	return cg_mkdir(fs, "", NULL);
}

/* Home, then every directory made, deepest first; then the mount. */
static inline void cg_fs_cleanup(struct cg_fs *fs)
{
	if (fs->home[0])
		cg_join(fs->home);
	while (fs->nmade > 0)
		rmdir(fs->made[--fs->nmade]);
	if (fs->mounted) {
		umount(fs->mount);
		rmdir(fs->mount);
		fs->mounted = false;
	}
}

static inline int cg_open(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/* A UDP address on the loopback of family, port in host order. */
struct cg_addr {
	struct sockaddr_storage ss;
	socklen_t len;
};

static inline void cg_loopback(int family, unsigned short port,
			       struct cg_addr *addr)
{
	memset(addr, 0, sizeof(*addr));
	if (family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&addr->ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		addr->len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&addr->ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		in6->sin6_addr = in6addr_loopback;
		addr->len = sizeof(*in6);
	}
}

/*
 * A UDP socket of family that belongs to the cgroup at path, bound to
 * the loopback (on a port of the kernel's choice, written to addr if
 * given): an fd, or -errno. The process is back home afterwards.
 */
static inline int cg_udp_socket_in(const struct cg_fs *fs, const char *path,
				   int family, struct cg_addr *addr)
{
	struct cg_addr any;
	int fd, ret;

	ret = cg_join(path);
	if (ret)
		return ret;
	fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ret = fd < 0 ? -errno : 0;
	if (cg_join(fs->home) && !ret)
		ret = -EBUSY;
	if (ret)
		goto fail;
	cg_loopback(family, 0, &any);
	if (bind(fd, (struct sockaddr *)&any.ss, any.len)) {
		ret = -errno;
		goto fail;
	}
	if (addr) {
		addr->len = sizeof(addr->ss);
		if (getsockname(fd, (struct sockaddr *)&addr->ss, &addr->len)) {
			ret = -errno;
			goto fail;
		}
	}
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	return ret;
}

/* 0 if sendto() took the datagram, else its errno. */
static inline int cg_send(int fd, const struct cg_addr *to, const void *buf,
			  size_t len)
{
	if (sendto(fd, buf, len, 0, (const struct sockaddr *)&to->ss,
		   to->len) < 0)
		return errno;
	return 0;
}

/* A datagram's length, or -EAGAIN if none came within timeout_ms. */
static inline int cg_recv(int fd, void *buf, size_t len, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t got;

	if (poll(&pfd, 1, timeout_ms) <= 0)
		return -EAGAIN;
	got = recv(fd, buf, len, MSG_DONTWAIT);
	return got < 0 ? -errno : (int)got;
}

#endif /* CGROUP_BPF_H */
