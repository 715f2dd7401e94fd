/*
 * gpuwork -- a CUDA process whose device state can be checked after a
 * checkpoint and restore.
 *
 * usage: gpuwork [-m MiB] -f statusfile
 *	  gpuwork --probe
 *
 * It allocates MiB of device memory (default 256) and fills it on the
 * device with a pattern derived from a seed, copies it back once to
 * check the pattern and remember its checksum, then every 10 ms runs a
 * kernel that increments a counter held in device memory and stores the
 * new value, mixed, in one word of a separate scratch buffer.  When
 * ready it appends
 *	ready pid=PID sum=HEX child=0 mib=N devs=UUID
 * to STATUSFILE.  On SIGUSR1 it runs one more kernel, copies the whole
 * pattern back and checks its checksum, checks that the device counter
 * equals the number of kernels the host launched and has advanced since
 * the previous check, checks every word of the scratch buffer, and
 * appends either
 *	verify ok sum=HEX counter=N thread=N child=0 devs=UUID
 * or "verify FAIL what".  counter is read from the device, thread is the
 * host's count of launches; child=0 says that it forks no child.  UUID
 * is that of the device in use at the time, as nvidia-smi prints it.
 * A CUDA failure outside a check appends "error what: message" and ends
 * the process.  The status file is opened for each line and written
 * with one write(2), so it never stays open across a checkpoint.
 * Descriptors other than 0, 1 and 2 that it inherits are closed first.
 *
 * With --probe it exits 0, printing the UUID and name of the device it
 * would use, when a CUDA device is usable and the driver has the
 * checkpoint API; otherwise it prints the reason on stderr and exits 77.
 */

#include <sys/types.h>

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/work.h"

#define CHUNK_WORDS	((size_t)2 << 20)	/* 16 MiB per copy */
#define SCRATCH_WORDS	4096
#define TICK_MS		10
#define GOLDEN		WORK_GOLDEN

__host__ __device__ static uint64_t	 mix(uint64_t);
__global__ static void	 fill_kernel(uint64_t *, size_t, uint64_t);
__global__ static void	 tick_kernel(unsigned long long *, uint64_t *);
static void		 cuda_fatal(const char *, cudaError_t)
			    __attribute__((__noreturn__));
static int		 device_uuid(char *, size_t);
static cudaError_t	 pattern_sum(int, uint64_t *, size_t *);
static int		 probe(void);
static cudaError_t	 tick(void);
static void		 usage(void) __attribute__((__noreturn__));
static void		 verify(void);

static const struct option longopts[] = {
	{ "probe",	no_argument,		NULL,	'P' },
	{ NULL,		0,			NULL,	0 }
};

static char			 uuid[64];
static uint64_t			*d_pattern, *d_scratch;
static unsigned long long	*d_counter;
static uint64_t			*h_chunk;
static uint64_t			 h_scratch[SCRATCH_WORDS];
static size_t			 nwords;
static uint64_t			 seed, sum;
static unsigned long long	 launches, last_counter;

/* The splitmix64 finaliser. */
__host__ __device__ static uint64_t
mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* Word i of the pattern is mix(s + (i + 1) * GOLDEN). */
__global__ static void
fill_kernel(uint64_t *p, size_t n, uint64_t s)
{
	size_t	i, stride;

	stride = (size_t)gridDim.x * blockDim.x;
	for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	    i += stride)
		p[i] = mix(s + (i + 1) * GOLDEN);
}

/* One thread: counter += 1; scratch[counter % SCRATCH_WORDS] = mix(counter). */
__global__ static void
tick_kernel(unsigned long long *counter, uint64_t *scratch)
{
	unsigned long long	c;

	c = *counter + 1;
	*counter = c;
	scratch[c % SCRATCH_WORDS] = mix(c);
}

static void
cuda_fatal(const char *what, cudaError_t e)
{
	work_status("error %s: %s", what, cudaGetErrorString(e));
	exit(1);
}

static void
usage(void)
{
	fprintf(stderr, "usage: gpuwork [-m MiB] -f statusfile\n"
	    "       gpuwork --probe\n");
	exit(2);
}

/*
 * Writes the UUID of the current device as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-
 * xxxxxxxxxxxx" to buf.  Returns 0, or -1 after a CUDA failure, which
 * cudaGetLastError() then returns.
 */
static int
device_uuid(char *buf, size_t len)
{
	struct cudaDeviceProp	 p;
	const unsigned char	*u;
	int			 dev;

	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaGetDeviceProperties(&p, dev) != cudaSuccess)
		return -1;
	u = (const unsigned char *)p.uuid.bytes;
	snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
	    u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
	    u[14], u[15]);
	return 0;
}

/*
 * Copies the pattern back a chunk at a time and computes its checksum
 * (FNV-1a over 64-bit words) into *sump.  With check set, also counts
 * into *badp the words that differ from the pattern the seed gives.
 * Returns cudaSuccess or the error of the failed copy.
 */
static cudaError_t
pattern_sum(int check, uint64_t *sump, size_t *badp)
{
	uint64_t	h = WORK_FNV_INIT;
	size_t		i, j, n, bad = 0;
	cudaError_t	e;

	for (i = 0; i < nwords; i += n) {
		n = nwords - i < CHUNK_WORDS ? nwords - i : CHUNK_WORDS;
		if ((e = cudaMemcpy(h_chunk, d_pattern + i, n * sizeof *h_chunk,
		    cudaMemcpyDeviceToHost)) != cudaSuccess)
			return e;
		h = work_fnv(h, h_chunk, n);
		for (j = 0; check && j < n; j++)
			if (h_chunk[j] != mix(seed + (i + j + 1) * GOLDEN))
				bad++;
	}
	*sump = h;
	if (badp != NULL)
		*badp = bad;
	return cudaSuccess;
}

static cudaError_t
tick(void)
{
	cudaError_t	e;

	tick_kernel<<<1, 1>>>(d_counter, d_scratch);
	if ((e = cudaGetLastError()) != cudaSuccess ||
	    (e = cudaDeviceSynchronize()) != cudaSuccess)
		return e;
	launches++;
	return cudaSuccess;
}

static void
verify(void)
{
	unsigned long long	c, k;
	uint64_t		now, want;
	size_t			j, bad, first = 0;
	cudaError_t		e;
	const char		*what;

	what = "kernel";
	if ((e = tick()) != cudaSuccess)
		goto cuda;

	what = "counter copy";
	if ((e = cudaMemcpy(&c, d_counter, sizeof c,
	    cudaMemcpyDeviceToHost)) != cudaSuccess)
		goto cuda;
	if (c != launches) {
		work_status("verify FAIL device counter %llu after %llu "
		    "launches", c, launches);
		return;
	}
	if (c <= last_counter) {
		work_status("verify FAIL device counter %llu, was %llu", c,
		    last_counter);
		return;
	}

	what = "scratch copy";
	if ((e = cudaMemcpy(h_scratch, d_scratch, sizeof h_scratch,
	    cudaMemcpyDeviceToHost)) != cudaSuccess)
		goto cuda;
	for (j = 0, bad = 0; j < SCRATCH_WORDS; j++) {
		/* the last value stored in word j, 0 if none yet */
		k = c >= j ? c - (c - j) % SCRATCH_WORDS : 0;
		want = k != 0 ? mix(k) : 0;
		if (h_scratch[j] != want && bad++ == 0)
			first = j;
	}
	if (bad != 0) {
		work_status("verify FAIL scratch: %zu of %d words wrong, first "
		    "word %zu", bad, SCRATCH_WORDS, first);
		return;
	}

	what = "pattern copy";
	if ((e = pattern_sum(0, &now, NULL)) != cudaSuccess)
		goto cuda;
	if (now != sum) {
		work_status("verify FAIL pattern sum=%016" PRIx64
		    " expected=%016" PRIx64, now, sum);
		return;
	}

	what = "device properties";
	if (device_uuid(uuid, sizeof uuid) == -1) {
		e = cudaGetLastError();
		goto cuda;
	}

	last_counter = c;
	work_status("verify ok sum=%016" PRIx64 " counter=%llu thread=%llu "
	    "child=0 devs=%s", now, c, launches, uuid);
	return;
cuda:
	work_status("verify FAIL %s: %s", what, cudaGetErrorString(e));
}

static int
probe(void)
{
	struct cudaDeviceProp	 p;
	void			*h;
	cudaError_t		 e;
	int			 n, dev, dv = 0, rv = 0;

	if ((e = cudaGetDeviceCount(&n)) != cudaSuccess) {
		cudaDriverGetVersion(&dv);
		cudaRuntimeGetVersion(&rv);
		if (dv == 0) {
			fprintf(stderr, "gpuwork: no usable CUDA device: no "
			    "CUDA driver (libcuda.so.1)\n");
			return 77;
		}
		fprintf(stderr, "gpuwork: no usable CUDA device: %s (driver "
		    "for CUDA %d.%d, runtime CUDA %d.%d)\n",
		    cudaGetErrorString(e), dv / 1000, dv % 1000 / 10,
		    rv / 1000, rv % 1000 / 10);
		return 77;
	}
	if (n == 0) {
		fprintf(stderr, "gpuwork: no CUDA device\n");
		return 77;
	}
	if ((e = cudaFree(0)) != cudaSuccess ||
	    (e = cudaGetDevice(&dev)) != cudaSuccess ||
	    (e = cudaGetDeviceProperties(&p, dev)) != cudaSuccess) {
		fprintf(stderr, "gpuwork: cannot use CUDA device: %s\n",
		    cudaGetErrorString(e));
		return 77;
	}
	/* The runtime has loaded the driver library: look in it. */
	if ((h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) == NULL ||
	    dlsym(h, "cuCheckpointProcessLock") == NULL) {
		fprintf(stderr, "gpuwork: the CUDA driver has no checkpoint "
		    "API (cuCheckpointProcessLock)\n");
		return 77;
	}
	if (device_uuid(uuid, sizeof uuid) == -1) {
		fprintf(stderr, "gpuwork: cannot read the device UUID: %s\n",
		    cudaGetErrorString(cudaGetLastError()));
		return 77;
	}
	printf("%s %s\n", uuid, p.name);
	return 0;
}

int
main(int argc, char *argv[])
{
	struct timespec		 ts;
	unsigned long		 mib = 256;
	size_t			 bad;
	char			*ep;
	cudaError_t		 e;
	int			 ch;

	while ((ch = getopt_long(argc, argv, "f:m:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'P':
			if (argc != 2)
				usage();
			return probe();
		case 'f':
			work_statusfile = optarg;
			break;
		case 'm':
			errno = 0;
			mib = strtoul(optarg, &ep, 10);
			if (errno || *ep != '\0' || mib == 0 || mib > 65536) {
				fprintf(stderr, "gpuwork: bad -m '%s'\n",
				    optarg);
				return 2;
			}
			break;
		default:
			usage();
		}
	}
	if (optind != argc || work_statusfile == NULL)
		usage();

	/* Before the CUDA runtime opens descriptors of its own. */
	work_close_inherited();
	work_signals(SA_RESTART);

	if ((e = cudaFree(0)) != cudaSuccess)
		cuda_fatal("CUDA initialisation", e);
	if (device_uuid(uuid, sizeof uuid) == -1)
		cuda_fatal("device properties", cudaGetLastError());

	nwords = (size_t)mib * 1024 * 1024 / sizeof *d_pattern;
	if ((h_chunk = (uint64_t *)malloc(CHUNK_WORDS *
	    sizeof *h_chunk)) == NULL) {
		work_status("error out of memory");
		return 1;
	}
	if ((e = cudaMalloc(&d_pattern, nwords * sizeof *d_pattern)) !=
	    cudaSuccess)
		cuda_fatal("device allocation", e);
	if ((e = cudaMalloc(&d_scratch, SCRATCH_WORDS * sizeof *d_scratch)) !=
	    cudaSuccess ||
	    (e = cudaMalloc(&d_counter, sizeof *d_counter)) != cudaSuccess)
		cuda_fatal("device allocation", e);
	if ((e = cudaMemset(d_scratch, 0, SCRATCH_WORDS *
	    sizeof *d_scratch)) != cudaSuccess ||
	    (e = cudaMemset(d_counter, 0, sizeof *d_counter)) != cudaSuccess)
		cuda_fatal("device memset", e);

	clock_gettime(CLOCK_REALTIME, &ts);
	seed = mix(((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec ^
	    ((uint64_t)ts.tv_nsec << 16));
	fill_kernel<<<1024, 256>>>(d_pattern, nwords, seed);
	if ((e = cudaGetLastError()) != cudaSuccess ||
	    (e = cudaDeviceSynchronize()) != cudaSuccess)
		cuda_fatal("fill kernel", e);
	if ((e = pattern_sum(1, &sum, &bad)) != cudaSuccess)
		cuda_fatal("pattern copy", e);
	if (bad != 0) {
		work_status("error fill kernel: %zu of %zu words wrong", bad,
		    nwords);
		return 1;
	}

	work_status("ready pid=%ld sum=%016" PRIx64 " child=0 mib=%lu devs=%s",
	    (long)getpid(), sum, mib, uuid);
	for (;;) {
		if (work_want_verify) {
			work_want_verify = 0;
			verify();
		}
		work_msleep(TICK_MS);
		if ((e = tick()) != cudaSuccess)
			cuda_fatal("tick kernel", e);
	}
}
