/*
 * genzipf - regenerate the zipf key traces used by the Linux 4.10 LRU
 * bpf_htab tests (zipf.100k.a1_01.out and zipf.100k.a0_01.out).
 *
 * The numbers must come out bit for bit as the 2016 fio-based generator
 * produced them, so every floating point expression below keeps the exact
 * shape (operand order, divisions, pow() arguments) of that generator.
 * See README.md in this directory for the algorithm and the fio commits it
 * follows.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "genzipf"

#define DEFAULT_THETA	1.01
#define DEFAULT_NRANGES	100000ULL
#define DEFAULT_SEED	1U
#define DEFAULT_COUNT	100000ULL

/* fio stops summing the zeta series after this many terms. */
#define ZETA_TERMS_MAX	10000000ULL

/* Largest item count: every count must be exact as a double. */
#define NRANGES_MAX	(1ULL << 53)

/* The multiplier of fio's __hash_u64() since May 2016 (Knuth, phi^2). */
#define MIX_MULT	UINT64_C(0x61C8864680B583EB)

/* ------------------------------------------------------------------ */
/* L'Ecuyer's three-component Tausworthe generator ("taus88").         */

struct taus88 {
	uint32_t s[3];
};

static uint32_t taus88_next(struct taus88 *t)
{
	uint32_t a = t->s[0], b = t->s[1], c = t->s[2];

	a = ((a & UINT32_C(0xfffffffe)) << 12) ^ (((a << 13) ^ a) >> 19);
	b = ((b & UINT32_C(0xfffffff8)) << 4) ^ (((b << 2) ^ b) >> 25);
	c = ((c & UINT32_C(0xfffffff0)) << 17) ^ (((c << 3) ^ c) >> 11);

	t->s[0] = a;
	t->s[1] = b;
	t->s[2] = c;
	return a ^ b ^ c;
}

/* Each component needs a minimum magnitude; bump small values past it. */
static uint32_t taus88_floor(uint32_t v, uint32_t min)
{
	return v < min ? v + min : v;
}

static void taus88_seed(struct taus88 *t, uint32_t seed)
{
	/*
	 * fio seeds from an LCG (multiplier 69069) whose starting point is
	 * written "(2^31) + (2^17) + (2^7)": in C '^' is XOR, so that is
	 * 29 + 19 + 5 = 53.  Reproduce the value, not the intent.
	 */
	const uint32_t start = 53;
	static const uint32_t min[3] = { 1, 7, 15 };
	uint32_t prev = start;
	int i;

	for (i = 0; i < 3; i++) {
		prev = taus88_floor((prev * UINT32_C(69069)) ^ seed, min[i]);
		t->s[i] = prev;
	}

	/* Discard the first six outputs to decorrelate from the seed. */
	for (i = 0; i < 6; i++)
		(void)taus88_next(t);
}

/* ------------------------------------------------------------------ */
/* Zipf sampler (Gray et al., "Quickly generating billion-record       */
/* synthetic databases", SIGMOD 1994), as used by fio.                 */

struct zipf {
	uint64_t n;		/* number of items */
	double theta;		/* skew */
	double zetan;		/* sum_{i=1..n} (1/i)^theta, capped */
	double zeta2;		/* first two terms of the same series */
	double alpha;
	double eta;
	double half_pow;	/* 0.5^theta: upper bound of rank 2 */
	uint64_t shift;		/* the generator's first output */
	struct taus88 rng;
};

static void zipf_setup(struct zipf *z, uint64_t n, double theta, uint32_t seed)
{
	uint64_t terms = n < ZETA_TERMS_MAX ? n : ZETA_TERMS_MAX;
	uint64_t k;

	memset(z, 0, sizeof(*z));
	z->n = n;
	z->theta = theta;

	taus88_seed(&z->rng, seed);
	z->shift = taus88_next(&z->rng);

	z->zeta2 = pow(1.0, theta) + pow(0.5, theta);
	z->zetan = 0.0;
	for (k = 1; k <= terms; k++)
		z->zetan += pow(1.0 / (double)k, theta);

	z->alpha = 1.0 / (1.0 - theta);
	z->eta = (1.0 - pow(2.0 / (double)n, 1.0 - theta)) /
		 (1.0 - z->zeta2 / z->zetan);
	z->half_pow = pow(0.5, theta);
}

/* Draw a 1-based rank: 1 is the most popular item. */
static uint64_t zipf_rank(struct zipf *z)
{
	double u = (double)taus88_next(&z->rng) / (double)UINT32_MAX;
	double scaled = u * z->zetan;
	double x;

	if (scaled < 1.0)
		return 1;
	if (scaled < 1.0 + z->half_pow)
		return 2;

	x = (double)z->n * pow(z->eta * u - z->eta + 1.0, z->alpha);
	/*
	 * For sane inputs x lies in [0, n].  Degenerate ones (n of 1 or 2)
	 * can make it NaN or larger, where fio's conversion to an integer is
	 * undefined; pin those to n so the result stays defined.  No value
	 * that fio computes with defined behaviour is changed.
	 */
	if (!(x >= 0.0) || x > (double)z->n)
		x = (double)z->n;
	return 1 + (uint64_t)x;
}

/*
 * Scatter ranks over the key space so the hot keys are not 0, 1, 2...
 * Keys lie in [0, n): the published traces do contain key 0, whatever
 * the Linux commit message says about "1 to 100k".
 */
static uint64_t zipf_key(struct zipf *z)
{
	uint64_t rank = zipf_rank(z);

	return ((rank - 1) * MIX_MULT + z->shift) % z->n;
}

/* ------------------------------------------------------------------ */
/* Command line.                                                       */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [-t theta] [-n nranges] [-s seed] [-c count]\n"
		"\n"
		"Print COUNT zipf-distributed keys in [0, NRANGES), one decimal\n"
		"key per line, exactly as fio's 2016 genzipf sampler drew them.\n"
		"\n"
		"  -t theta    skew, >= 0 and != 1 (default %.2f)\n"
		"  -n nranges  number of distinct keys, 1..2^53 (default %llu)\n"
		"  -s seed     taus88 seed, 0..4294967295 (default %u)\n"
		"  -c count    number of keys to print (default %llu)\n"
		"  -h          show this help\n"
		"\n"
		"The LRU test traces are:\n"
		"  " PROG " -t 1.01 > zipf.100k.a1_01.out\n"
		"  " PROG " -t 0.01 > zipf.100k.a0_01.out\n",
		DEFAULT_THETA, DEFAULT_NRANGES, DEFAULT_SEED, DEFAULT_COUNT);
}

/* Report a command line mistake and exit with status 2. */
static void die_usage(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry '" PROG " -h' for usage.\n", stderr);
	exit(2);
}

static double parse_theta(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v))
		die_usage("invalid theta '%s': not a finite number", s);
	if (v < 0.0)
		die_usage("invalid theta '%s': must not be negative", s);
	if (v == 1.0)
		die_usage("invalid theta '%s': must differ from 1 "
			  "(the sampler divides by 1 - theta)", s);
	return v;
}

static uint64_t parse_u64(const char *s, const char *name, uint64_t lo,
			  uint64_t hi)
{
	char *end;
	unsigned long long v;

	/* strtoull() would quietly accept "-1" and wrap it around. */
	if (*s < '0' || *s > '9')
		die_usage("invalid %s '%s': not a decimal number", name, s);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end != '\0')
		die_usage("invalid %s '%s': not a decimal number", name, s);
	if (errno == ERANGE || v < lo || v > hi)
		die_usage("invalid %s '%s': expected %" PRIu64 "..%" PRIu64,
			  name, s, lo, hi);
	return v;
}

int main(int argc, char **argv)
{
	double theta = DEFAULT_THETA;
	uint64_t n = DEFAULT_NRANGES;
	uint64_t count = DEFAULT_COUNT;
	uint32_t seed = DEFAULT_SEED;
	struct zipf z;
	uint64_t i;
	int opt;

	opterr = 0;
	while ((opt = getopt(argc, argv, ":t:n:s:c:h")) != -1) {
		switch (opt) {
		case 't':
			theta = parse_theta(optarg);
			break;
		case 'n':
			n = parse_u64(optarg, "nranges", 1, NRANGES_MAX);
			break;
		case 's':
			seed = (uint32_t)parse_u64(optarg, "seed", 0,
						   UINT32_MAX);
			break;
		case 'c':
			count = parse_u64(optarg, "count", 0, UINT64_MAX);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case ':':
			die_usage("option -%c needs a value", optopt);
			break;
		default:
			die_usage("unknown option -%c", optopt);
			break;
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);

	zipf_setup(&z, n, theta, seed);

	for (i = 0; i < count; i++) {
		if (printf("%" PRIu64 "\n", zipf_key(&z)) < 0)
			break;
	}

	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, PROG ": write error: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
