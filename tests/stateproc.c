/*
 * stateproc -- a process whose per-process and per-thread state must be
 * the same after a checkpoint and restore.
 *
 * usage: stateproc CASE DIR
 *
 * It sets up the state that CASE names, writes its PID to DIR/ready,
 * then sleeps in 20 ms steps, touching nothing of that state, until
 * DIR/go exists.  Then it checks that the state is exactly what it set
 * up and writes "ok CASE" or "FAIL CASE: why" to DIR/result; it exits
 * 0 or 1.  Both files are written under another name and renamed, so a
 * reader never sees half of one.  With PERTURB=1 in the environment it
 * changes the state itself once DIR/ready is written, so that its check
 * is seen to fail.  Descriptors other than 0, 1 and 2 that it inherits
 * are closed first.  The cases:
 *
 *	threads		threads' TLS values, names, TIDs, signal masks
 *	fpu		x87 control word and registers, MXCSR, xmm0-15
 *			(ymm0-15 with AVX) live in a spinning thread
 *	sigaction	handlers, flags, masks, SIG_IGN; each handler runs
 *	sigpending	blocked mask; pending standard signals (one private
 *			to the thread) and queued real-time signals with
 *			their values, delivered in order once unblocked
 *	sigaltstack	two threads' alternate stacks, one SS_AUTODISARM;
 *			handlers run on them
 *	posixtimers	timer_create timers: IDs, clocks, sigev values,
 *			intervals; the periodic one still fires
 *	itimers		ITIMER_REAL, ITIMER_VIRTUAL and ITIMER_PROF
 *	timerfd		armed timerfds, relative and absolute; expirations
 *	timerfdexpired	a periodic timerfd expired, its expirations unread
 *	cwd		a working directory with a space in its path
 *	umask		the file mode creation mask
 *	rlimits		every resource limit, several changed
 *	pgrp		children in other process groups and a session
 *	zombie		unreaped children: an exit status and a signal
 *	futex		threads in FUTEX_WAIT (three kinds), on a condition
 *			variable and on a mutex, woken afterwards
 *	comm		the process name (PR_SET_NAME)
 *	personality	personality(2) flags
 *	nonewprivs	PR_SET_NO_NEW_PRIVS
 *	pdeathsig	PR_SET_PDEATHSIG
 *	dumpable	PR_SET_DUMPABLE 0
 *	subreaper	PR_SET_CHILD_SUBREAPER
 *	thpdisable	PR_SET_THP_DISABLE
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef SS_AUTODISARM
#define SS_AUTODISARM	(1U << 31)	/* linux/signal.h */
#endif

struct scase {
	const char	*name;
	void		(*setup)(void);
	void		(*perturb)(void);
	void		(*check)(void);
};

static void	 fail(const char *, ...)
		    __attribute__((__format__(__printf__, 1, 2)));
static void	 die(const char *, ...)
		    __attribute__((__format__(__printf__, 1, 2), __noreturn__));
static void	 msleep(long);
static void	 put_file(const char *, const char *);
static int	 read_file(const char *, char *, size_t);
static void	 close_inherited(void);
static int	 same_set(const sigset_t *, const sigset_t *, int *);
static void	 set_of(sigset_t *, const int *);
static long	 task_syscall(pid_t);
static char	 task_state(pid_t);
static long	 ts_ns(const struct timespec *);
static long	 tv_us(const struct timeval *);

static const char	*dir;
static const char	*casename;
static char		 why[1024];

/* ---------------------------------------------------------------- */

static void
fail(const char *fmt, ...)
{
	va_list	ap;

	if (why[0] != '\0')
		return;		/* the first failure tells most */
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
}

static void
die(const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "stateproc %s: ", casename ? casename : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", strerror(errno));
	exit(2);
}

static void
msleep(long ms)
{
	struct timespec	ts = { ms / 1000, ms % 1000 * 1000000L };

	nanosleep(&ts, NULL);	/* a signal may cut it short */
}

/* Writes DIR/name whole: under another name, then renamed. */
static void
put_file(const char *name, const char *text)
{
	char	tmp[PATH_MAX], path[PATH_MAX];
	size_t	len = strlen(text);
	int	fd;

	snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1)
		die("cannot create '%s'", tmp);
	if (write(fd, text, len) != (ssize_t)len || close(fd) == -1)
		die("cannot write '%s'", tmp);
	if (rename(tmp, path) == -1)
		die("cannot rename '%s'", tmp);
}

/* Reads path into buf, NUL-terminated.  Returns its length or -1. */
static int
read_file(const char *path, char *buf, size_t size)
{
	ssize_t	n;
	size_t	len = 0;
	int	fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	while (len < size - 1 &&
	    (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += n;
	close(fd);
	buf[len] = '\0';
	return (int)len;
}

static void
close_inherited(void)
{
	DIR		*d;
	struct dirent	*e;
	int		 fd, self;

	if ((d = opendir("/proc/self/fd")) == NULL)
		return;
	self = dirfd(d);
	while ((e = readdir(d)) != NULL) {
		fd = atoi(e->d_name);
		if (e->d_name[0] != '.' && fd > 2 && fd != self)
			close(fd);
	}
	closedir(d);
}

/* Whether a and b hold the same signals; *sigp the first that differs. */
static int
same_set(const sigset_t *a, const sigset_t *b, int *sigp)
{
	int	sig;

	for (sig = 1; sig < NSIG; sig++)
		if (sigismember(a, sig) != sigismember(b, sig)) {
			*sigp = sig;
			return 0;
		}
	return 1;
}

/* sigs: a list ending in 0. */
static void
set_of(sigset_t *set, const int *sigs)
{
	sigemptyset(set);
	for (; *sigs != 0; sigs++)
		sigaddset(set, *sigs);
}

/* The system call that thread tid is in, -1 if none, -2 if unknown. */
static long
task_syscall(pid_t tid)
{
	char	path[64], buf[256];

	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
	if (read_file(path, buf, sizeof buf) <= 0)
		return -2;
	if (strncmp(buf, "running", 7) == 0)
		return -1;
	return strtol(buf, NULL, 10);
}

static char
task_state(pid_t tid)
{
	char	path[64], buf[1024], *s;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)tid);
	if (read_file(path, buf, sizeof buf) <= 0 ||
	    (s = strrchr(buf, ')')) == NULL || s[1] == '\0')
		return '?';
	return s[2];
}

static long
ts_ns(const struct timespec *ts)
{
	return ts->tv_sec * 1000000000L + ts->tv_nsec;
}

static long
tv_us(const struct timeval *tv)
{
	return tv->tv_sec * 1000000L + tv->tv_usec;
}

/* Sleeps until the flag is set, in short steps. */
static void
wait_flag(atomic_int *flag)
{
	while (atomic_load(flag) == 0)
		msleep(20);
}

/* ---------------------------------------------------------------- */
/* threads */

#define NTHREADS	4

static __thread unsigned long	 tls_value;
static __thread char		 tls_text[24];

struct worker {
	pthread_t	 th;
	int		 i;
	pid_t		 tid;
	char		 name[16];
	sigset_t	 mask;
	char		 why[256];
};

static struct worker	 workers[NTHREADS];
static atomic_int	 threads_up, threads_go, threads_done;
static pid_t		 main_tid;
static sigset_t		 main_mask;

static void
thread_mask(int i, sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGRTMIN + i);
	if (i % 2 == 1)
		sigaddset(set, SIGUSR1);
	if (i == 2) {
		sigaddset(set, SIGWINCH);
		sigaddset(set, SIGHUP);
	}
}

static void *
thread_main(void *arg)
{
	struct worker	*w = arg;
	sigset_t	 now;
	char		 name[32], path[64], comm[64];
	int		 sig;

	tls_value = 0x1000 + 0x111 * (unsigned long)w->i;
	snprintf(tls_text, sizeof tls_text, "tls of thread %d", w->i);
	w->tid = gettid();
	pthread_sigmask(SIG_SETMASK, &w->mask, NULL);
	if (pthread_setname_np(pthread_self(), w->name) != 0)
		die("pthread_setname_np");
	atomic_fetch_add(&threads_up, 1);
	wait_flag(&threads_go);

	if (tls_value != 0x1000 + 0x111 * (unsigned long)w->i)
		snprintf(w->why, sizeof w->why, "thread %d: TLS value %#lx",
		    w->i, tls_value);
	snprintf(name, sizeof name, "tls of thread %d", w->i);
	if (w->why[0] == '\0' && strcmp(tls_text, name) != 0)
		snprintf(w->why, sizeof w->why, "thread %d: TLS text '%s'",
		    w->i, tls_text);
	if (w->why[0] == '\0' && gettid() != w->tid)
		snprintf(w->why, sizeof w->why, "thread %d: tid %d, was %d",
		    w->i, (int)gettid(), (int)w->tid);
	pthread_getname_np(pthread_self(), name, sizeof name);
	if (w->why[0] == '\0' && strcmp(name, w->name) != 0)
		snprintf(w->why, sizeof w->why, "thread %d: name '%s', "
		    "expected '%s'", w->i, name, w->name);
	snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)w->tid);
	if (read_file(path, comm, sizeof comm) < 0)
		comm[0] = '\0';
	comm[strcspn(comm, "\n")] = '\0';
	if (w->why[0] == '\0' && strcmp(comm, w->name) != 0)
		snprintf(w->why, sizeof w->why, "thread %d: comm '%s'",
		    w->i, comm);
	pthread_sigmask(SIG_SETMASK, NULL, &now);
	if (w->why[0] == '\0' && !same_set(&now, &w->mask, &sig))
		snprintf(w->why, sizeof w->why, "thread %d: signal %d %s "
		    "its mask", w->i, sig, sigismember(&now, sig) ? "in" :
		    "missing from");
	atomic_fetch_add(&threads_done, 1);
	return NULL;
}

static void
threads_setup(void)
{
	int	i;

	main_tid = gettid();
	tls_value = 0xabcdef;
	snprintf(tls_text, sizeof tls_text, "tls of main");
	sigemptyset(&main_mask);
	sigaddset(&main_mask, SIGTERM);
	sigaddset(&main_mask, SIGRTMAX - 1);
	pthread_sigmask(SIG_SETMASK, &main_mask, NULL);
	for (i = 0; i < NTHREADS; i++) {
		workers[i].i = i;
		snprintf(workers[i].name, sizeof workers[i].name, "stw-%d-%c",
		    i, 'a' + i);
		thread_mask(i, &workers[i].mask);
		if (pthread_create(&workers[i].th, NULL, thread_main,
		    &workers[i]) != 0)
			die("pthread_create");
	}
	while (atomic_load(&threads_up) < NTHREADS)
		msleep(5);
}

static void
threads_perturb(void)
{
	pthread_setname_np(workers[2].th, "changed");
}

static void
threads_check(void)
{
	DIR		*d;
	struct dirent	*e;
	sigset_t	 now;
	char		 path[64], buf[4096], *s;
	int		 i, n = 0, known, sig;

	/* The tasks, before any thread moves. */
	if ((d = opendir("/proc/self/task")) == NULL)
		die("opendir");
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		n++;
		known = atoi(e->d_name) == main_tid;
		for (i = 0; i < NTHREADS; i++)
			known |= atoi(e->d_name) == workers[i].tid;
		if (!known)
			fail("unknown task %s", e->d_name);
	}
	closedir(d);
	if (n != NTHREADS + 1)
		fail("%d tasks, expected %d", n, NTHREADS + 1);
	if (read_file("/proc/self/status", buf, sizeof buf) < 0 ||
	    (s = strstr(buf, "\nThreads:")) == NULL ||
	    atoi(s + 9) != NTHREADS + 1)
		fail("/proc/self/status: not %d threads", NTHREADS + 1);
	/* The masks as the kernel shows them. */
	for (i = 0; i < NTHREADS; i++) {
		unsigned long long	want = 0, got;

		for (sig = 1; sig < NSIG && sig <= 64; sig++)
			if (sigismember(&workers[i].mask, sig))
				want |= 1ULL << (sig - 1);
		snprintf(path, sizeof path, "/proc/self/task/%d/status",
		    (int)workers[i].tid);
		if (read_file(path, buf, sizeof buf) < 0 ||
		    (s = strstr(buf, "\nSigBlk:")) == NULL) {
			fail("thread %d: no SigBlk", i);
			continue;
		}
		got = strtoull(s + 8, NULL, 16);
		if (got != want)
			fail("thread %d: SigBlk %016llx, expected %016llx", i,
			    got, want);
	}
	atomic_store(&threads_go, 1);
	for (i = 0; i < NTHREADS; i++) {
		pthread_join(workers[i].th, NULL);
		if (workers[i].why[0] != '\0')
			fail("%s", workers[i].why);
	}
	if (gettid() != main_tid)
		fail("main tid %d, was %d", (int)gettid(), (int)main_tid);
	if (tls_value != 0xabcdef || strcmp(tls_text, "tls of main") != 0)
		fail("main thread: TLS %#lx '%s'", tls_value, tls_text);
	pthread_sigmask(SIG_SETMASK, NULL, &now);
	if (!same_set(&now, &main_mask, &sig))
		fail("main thread: signal %d differs in its mask", sig);
}

/* ---------------------------------------------------------------- */
/* fpu */

struct fpregs {
	unsigned char		in[16][32];	/*    0 */
	unsigned char		out[16][32];	/*  512 */
	double			x87in[3];	/* 1024 */
	double			x87out[3];	/* 1048 */
	uint16_t		fcw_in;		/* 1072 */
	uint16_t		fcw_out;	/* 1074 */
	uint16_t		fcw_save;	/* 1076 */
	uint16_t		pad;		/* 1078 */
	uint32_t		mxcsr_in;	/* 1080 */
	uint32_t		mxcsr_out;	/* 1084 */
	uint32_t		mxcsr_save;	/* 1088 */
	volatile uint32_t	flag;		/* 1092: 1 go, 2 perturb */
	volatile uint32_t	loaded;		/* 1096 */
};

_Static_assert(offsetof(struct fpregs, out) == 512, "out");
_Static_assert(offsetof(struct fpregs, x87in) == 1024, "x87in");
_Static_assert(offsetof(struct fpregs, x87out) == 1048, "x87out");
_Static_assert(offsetof(struct fpregs, fcw_in) == 1072, "fcw_in");
_Static_assert(offsetof(struct fpregs, mxcsr_in) == 1080, "mxcsr_in");
_Static_assert(offsetof(struct fpregs, flag) == 1092, "flag");
_Static_assert(offsetof(struct fpregs, loaded) == 1096, "loaded");

static struct fpregs	fp __attribute__((aligned(64)));
static int		fp_avx;
static pthread_t	fp_thread;

#define FP_PROLOGUE \
	"fnstcw 1076(%0)\n\t" \
	"stmxcsr 1088(%0)\n\t" \
	"fldcw 1072(%0)\n\t" \
	"ldmxcsr 1080(%0)\n\t" \
	"fldl 1024(%0)\n\t" \
	"fldl 1032(%0)\n\t" \
	"fldl 1040(%0)\n\t"
/* Spins, touching no register it holds, until flag is 1. */
#define FP_LOOP(perturb) \
	"movl $1, 1096(%0)\n" \
	"1:\n\t" \
	"pause\n\t" \
	"movl 1092(%0), %%eax\n\t" \
	"cmpl $1, %%eax\n\t" \
	"je 2f\n\t" \
	"cmpl $2, %%eax\n\t" \
	"jne 1b\n\t" \
	perturb "\n\t" \
	"movl $0, 1092(%0)\n\t" \
	"jmp 1b\n" \
	"2:\n\t"
#define FP_EPILOGUE \
	"fstpl 1064(%0)\n\t" \
	"fstpl 1056(%0)\n\t" \
	"fstpl 1048(%0)\n\t" \
	"fnstcw 1074(%0)\n\t" \
	"stmxcsr 1084(%0)\n\t" \
	"fldcw 1076(%0)\n\t" \
	"ldmxcsr 1088(%0)\n\t"
#define FP_CLOBBERS "eax", "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", \
	"xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
	"xmm12", "xmm13", "xmm14", "xmm15"

static void *
fp_main_sse(void *arg)
{
	__asm__ __volatile__(
	    FP_PROLOGUE
	    "movdqu 0(%0), %%xmm0\n\t"    "movdqu 32(%0), %%xmm1\n\t"
	    "movdqu 64(%0), %%xmm2\n\t"   "movdqu 96(%0), %%xmm3\n\t"
	    "movdqu 128(%0), %%xmm4\n\t"  "movdqu 160(%0), %%xmm5\n\t"
	    "movdqu 192(%0), %%xmm6\n\t"  "movdqu 224(%0), %%xmm7\n\t"
	    "movdqu 256(%0), %%xmm8\n\t"  "movdqu 288(%0), %%xmm9\n\t"
	    "movdqu 320(%0), %%xmm10\n\t" "movdqu 352(%0), %%xmm11\n\t"
	    "movdqu 384(%0), %%xmm12\n\t" "movdqu 416(%0), %%xmm13\n\t"
	    "movdqu 448(%0), %%xmm14\n\t" "movdqu 480(%0), %%xmm15\n\t"
	    FP_LOOP("pxor %%xmm5, %%xmm5")
	    "movdqu %%xmm0, 512(%0)\n\t"  "movdqu %%xmm1, 544(%0)\n\t"
	    "movdqu %%xmm2, 576(%0)\n\t"  "movdqu %%xmm3, 608(%0)\n\t"
	    "movdqu %%xmm4, 640(%0)\n\t"  "movdqu %%xmm5, 672(%0)\n\t"
	    "movdqu %%xmm6, 704(%0)\n\t"  "movdqu %%xmm7, 736(%0)\n\t"
	    "movdqu %%xmm8, 768(%0)\n\t"  "movdqu %%xmm9, 800(%0)\n\t"
	    "movdqu %%xmm10, 832(%0)\n\t" "movdqu %%xmm11, 864(%0)\n\t"
	    "movdqu %%xmm12, 896(%0)\n\t" "movdqu %%xmm13, 928(%0)\n\t"
	    "movdqu %%xmm14, 960(%0)\n\t" "movdqu %%xmm15, 992(%0)\n\t"
	    FP_EPILOGUE
	    : : "r"(&fp) : FP_CLOBBERS);
	return NULL;
}

static void *
fp_main_avx(void *arg)
{
	__asm__ __volatile__(
	    FP_PROLOGUE
	    "vmovdqu 0(%0), %%ymm0\n\t"    "vmovdqu 32(%0), %%ymm1\n\t"
	    "vmovdqu 64(%0), %%ymm2\n\t"   "vmovdqu 96(%0), %%ymm3\n\t"
	    "vmovdqu 128(%0), %%ymm4\n\t"  "vmovdqu 160(%0), %%ymm5\n\t"
	    "vmovdqu 192(%0), %%ymm6\n\t"  "vmovdqu 224(%0), %%ymm7\n\t"
	    "vmovdqu 256(%0), %%ymm8\n\t"  "vmovdqu 288(%0), %%ymm9\n\t"
	    "vmovdqu 320(%0), %%ymm10\n\t" "vmovdqu 352(%0), %%ymm11\n\t"
	    "vmovdqu 384(%0), %%ymm12\n\t" "vmovdqu 416(%0), %%ymm13\n\t"
	    "vmovdqu 448(%0), %%ymm14\n\t" "vmovdqu 480(%0), %%ymm15\n\t"
	    FP_LOOP("vpxor %%ymm5, %%ymm5, %%ymm5")
	    "vmovdqu %%ymm0, 512(%0)\n\t"  "vmovdqu %%ymm1, 544(%0)\n\t"
	    "vmovdqu %%ymm2, 576(%0)\n\t"  "vmovdqu %%ymm3, 608(%0)\n\t"
	    "vmovdqu %%ymm4, 640(%0)\n\t"  "vmovdqu %%ymm5, 672(%0)\n\t"
	    "vmovdqu %%ymm6, 704(%0)\n\t"  "vmovdqu %%ymm7, 736(%0)\n\t"
	    "vmovdqu %%ymm8, 768(%0)\n\t"  "vmovdqu %%ymm9, 800(%0)\n\t"
	    "vmovdqu %%ymm10, 832(%0)\n\t" "vmovdqu %%ymm11, 864(%0)\n\t"
	    "vmovdqu %%ymm12, 896(%0)\n\t" "vmovdqu %%ymm13, 928(%0)\n\t"
	    "vmovdqu %%ymm14, 960(%0)\n\t" "vmovdqu %%ymm15, 992(%0)\n\t"
	    "vzeroupper\n\t"
	    FP_EPILOGUE
	    : : "r"(&fp) : FP_CLOBBERS);
	return NULL;
}

static void
fpu_setup(void)
{
	int	i, j;

	fp_avx = __builtin_cpu_supports("avx");
	for (i = 0; i < 16; i++)
		for (j = 0; j < 32; j++)
			fp.in[i][j] = (unsigned char)(0x5a + 37 * i + 11 * j);
	fp.x87in[0] = 3.14159265358979;
	fp.x87in[1] = -2.5e-300;
	fp.x87in[2] = 1.0 / 3.0;
	fp.fcw_in = 0x0e7f;	/* 53-bit precision, truncate, all masked */
	fp.mxcsr_in = 0xdfc0;	/* FZ, round up, DAZ, all masked */
	if (pthread_create(&fp_thread, NULL, fp_avx ? fp_main_avx :
	    fp_main_sse, NULL) != 0)
		die("pthread_create");
	while (fp.loaded == 0)
		msleep(5);
}

static void
fpu_perturb(void)
{
	fp.flag = 2;
	while (fp.flag == 2)
		msleep(5);
}

static void
fpu_check(void)
{
	int	i, n = fp_avx ? 32 : 16;

	fp.flag = 1;
	pthread_join(fp_thread, NULL);
	for (i = 0; i < 16; i++)
		if (memcmp(fp.in[i], fp.out[i], n) != 0)
			fail("%cmm%d differs (%s%02x... now %02x...)",
			    fp_avx ? 'y' : 'x', i, "was ", fp.in[i][0],
			    fp.out[i][0]);
	if (fp.fcw_out != fp.fcw_in)
		fail("x87 control word %#x, expected %#x", fp.fcw_out,
		    fp.fcw_in);
	if (fp.mxcsr_out != fp.mxcsr_in)
		fail("MXCSR %#x, expected %#x", fp.mxcsr_out, fp.mxcsr_in);
	for (i = 0; i < 3; i++)
		if (memcmp(&fp.x87in[i], &fp.x87out[i], sizeof(double)) != 0)
			fail("x87 register st(%d): %g, expected %g", 2 - i,
			    fp.x87out[i], fp.x87in[i]);
}

/* ---------------------------------------------------------------- */
/* sigaction */

#define NSA	8

static const int	 sa_sigs[NSA] = { SIGUSR1, SIGUSR2, SIGHUP, SIGWINCH,
			    SIGPIPE, SIGTTOU, SIGURG, 0 /* SIGRTMIN+5 */ };
static struct sigaction	 sa_set[NSA];
static volatile sig_atomic_t	sa_ran[NSIG], sa_code[NSIG];
static sigset_t		 sa_inmask[NSIG];
static volatile uintptr_t	sa_where[NSIG];
static void		*sa_stack;
#define SA_STACK_SIZE	(64 * 1024)

static void
sa_info(int sig, siginfo_t *si, void *uc)
{
	sa_ran[sig]++;
	sa_code[sig] = si->si_code;
	sigprocmask(SIG_SETMASK, NULL, &sa_inmask[sig]);
}

static void
sa_plain(int sig)
{
	int	local;

	sa_ran[sig]++;
	sa_where[sig] = (uintptr_t)&local;
	sigprocmask(SIG_SETMASK, NULL, &sa_inmask[sig]);
}

static void
sigaction_setup(void)
{
	struct sigaction	sa;
	stack_t			ss;
	int			i, sig;

	if ((sa_stack = mmap(NULL, SA_STACK_SIZE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED)
		die("mmap");
	ss.ss_sp = sa_stack;
	ss.ss_size = SA_STACK_SIZE;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL) == -1)
		die("sigaltstack");
	for (i = 0; i < NSA; i++) {
		sig = sa_sigs[i] != 0 ? sa_sigs[i] : SIGRTMIN + 5;
		memset(&sa, 0, sizeof sa);
		sigemptyset(&sa.sa_mask);
		switch (sig) {
		case SIGUSR1:
			sa.sa_sigaction = sa_info;
			sa.sa_flags = SA_SIGINFO | SA_RESTART;
			sigaddset(&sa.sa_mask, SIGTERM);
			sigaddset(&sa.sa_mask, SIGRTMIN + 7);
			break;
		case SIGUSR2:
			sa.sa_handler = sa_plain;
			sa.sa_flags = SA_NODEFER;
			sigaddset(&sa.sa_mask, SIGCHLD);
			break;
		case SIGHUP:
			sa.sa_handler = sa_plain;
			sa.sa_flags = SA_RESETHAND;
			break;
		case SIGWINCH:
			sa.sa_handler = sa_plain;
			sa.sa_flags = SA_ONSTACK | SA_RESTART;
			break;
		case SIGPIPE:
		case SIGTTOU:
			sa.sa_handler = SIG_IGN;
			break;
		case SIGURG:
			sa.sa_handler = sa_plain;
			sa.sa_flags = SA_RESTART | SA_NODEFER | SA_ONSTACK;
			sigfillset(&sa.sa_mask);
			break;
		default:
			sa.sa_sigaction = sa_info;
			sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
			sigaddset(&sa.sa_mask, SIGUSR1);
			break;
		}
		if (sigaction(sig, &sa, NULL) == -1 ||
		    sigaction(sig, NULL, &sa_set[i]) == -1)
			die("sigaction %d", sig);
	}
}

static void
sigaction_perturb(void)
{
	struct sigaction	sa = sa_set[1];

	sa.sa_flags &= ~SA_NODEFER;
	sigaction(SIGUSR2, &sa, NULL);
}

static void
sigaction_check(void)
{
	struct sigaction	 now;
	uintptr_t		 lo = (uintptr_t)sa_stack;
	int			 i, sig, other;

	for (i = 0; i < NSA; i++) {
		sig = sa_sigs[i] != 0 ? sa_sigs[i] : SIGRTMIN + 5;
		if (sigaction(sig, NULL, &now) == -1) {
			fail("sigaction %d: %s", sig, strerror(errno));
			continue;
		}
		if (now.sa_handler != sa_set[i].sa_handler)
			fail("signal %d: handler %p, expected %p", sig,
			    (void *)now.sa_handler,
			    (void *)sa_set[i].sa_handler);
		if (now.sa_flags != sa_set[i].sa_flags)
			fail("signal %d: flags %#x, expected %#x", sig,
			    (unsigned)now.sa_flags,
			    (unsigned)sa_set[i].sa_flags);
		if (!same_set(&now.sa_mask, &sa_set[i].sa_mask, &other))
			fail("signal %d: signal %d differs in sa_mask", sig,
			    other);
		if (now.sa_restorer != sa_set[i].sa_restorer)
			fail("signal %d: restorer differs", sig);
	}
	if (why[0] != '\0')
		return;
	/* Each handler runs as it was set up. */
	for (i = 0; i < NSA; i++) {
		sig = sa_sigs[i] != 0 ? sa_sigs[i] : SIGRTMIN + 5;
		raise(sig);
		if (sa_set[i].sa_handler == SIG_IGN) {
			if (sa_ran[sig] != 0)
				fail("ignored signal %d ran a handler", sig);
			continue;
		}
		if (sa_ran[sig] != 1) {
			fail("signal %d: handler ran %d times", sig,
			    (int)sa_ran[sig]);
			continue;
		}
		if ((sa_set[i].sa_flags & SA_SIGINFO) &&
		    sa_code[sig] != SI_TKILL)
			fail("signal %d: si_code %d", sig, (int)sa_code[sig]);
		if (sigismember(&sa_inmask[sig], sig) !=
		    (!(sa_set[i].sa_flags & SA_NODEFER) ||
		    sigismember(&sa_set[i].sa_mask, sig)))
			fail("signal %d: %s in the handler's mask", sig,
			    sigismember(&sa_inmask[sig], sig) ? "was" :
			    "was not");
		for (other = 1; other < NSIG; other++)
			if (other != sig && other != SIGKILL &&
			    other != SIGSTOP &&
			    sigismember(&sa_set[i].sa_mask, other) &&
			    !sigismember(&sa_inmask[sig], other))
				fail("signal %d: %d not blocked in its "
				    "handler", sig, other);
		if (sa_where[sig] != 0 && (sa_set[i].sa_flags & SA_ONSTACK) &&
		    (sa_where[sig] < lo || sa_where[sig] >= lo +
		    SA_STACK_SIZE))
			fail("signal %d: handler not on the alternate stack",
			    sig);
		if (sa_where[sig] != 0 && !(sa_set[i].sa_flags & SA_ONSTACK) &&
		    sa_where[sig] >= lo && sa_where[sig] < lo + SA_STACK_SIZE)
			fail("signal %d: handler on the alternate stack", sig);
		if (sigaction(sig, NULL, &now) == -1 ||
		    (now.sa_handler == SIG_DFL) !=
		    !!(sa_set[i].sa_flags & SA_RESETHAND))
			fail("signal %d: handler %sreset after delivery", sig,
			    now.sa_handler == SIG_DFL ? "" : "not ");
	}
}

/* ---------------------------------------------------------------- */
/* sigpending */

#define NPEND	7

struct got {
	int	sig;
	int	code;
	int	value;
	pid_t	pid;
};

static struct got	 pend_got[16];
static volatile int	 pend_n;
static sigset_t		 pend_mask;

static void
pend_handler(int sig, siginfo_t *si, void *uc)
{
	if (pend_n < 16) {
		pend_got[pend_n].sig = sig;
		pend_got[pend_n].code = si->si_code;
		pend_got[pend_n].value = si->si_code == SI_QUEUE ?
		    si->si_value.sival_int : 0;
		pend_got[pend_n].pid = si->si_pid;
	}
	pend_n++;
}

static void
sigpending_setup(void)
{
	struct sigaction	sa;
	union sigval		v;
	int			sigs[] = { SIGUSR1, SIGUSR2, SIGTERM, SIGINT,
				    SIGRTMIN + 1, SIGRTMIN + 2, 0 };
	int			i;

	set_of(&pend_mask, sigs);
	sigprocmask(SIG_SETMASK, &pend_mask, NULL);
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = pend_handler;
	sa.sa_flags = SA_SIGINFO;
	sigfillset(&sa.sa_mask);	/* one at a time, in order */
	for (i = 0; sigs[i] != 0; i++)
		if (sigaction(sigs[i], &sa, NULL) == -1)
			die("sigaction");
	/* SIGUSR1 private to this thread, the others shared. */
	if (syscall(SYS_tgkill, getpid(), gettid(), SIGUSR1) == -1 ||
	    kill(getpid(), SIGUSR2) == -1)
		die("kill");
	v.sival_int = 201;
	sigqueue(getpid(), SIGRTMIN + 2, v);
	for (i = 101; i <= 103; i++) {
		v.sival_int = i;
		sigqueue(getpid(), SIGRTMIN + 1, v);
	}
	v.sival_int = 202;
	sigqueue(getpid(), SIGRTMIN + 2, v);
}

static void
sigpending_perturb(void)
{
	sigset_t	set;

	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN + 1);
	sigwaitinfo(&set, NULL);
}

static unsigned long long
status_mask(const char *status, const char *field)
{
	const char	*s = strstr(status, field);

	return s != NULL ? strtoull(s + strlen(field), NULL, 16) : ~0ULL;
}

static void
sigpending_check(void)
{
	static const struct {
		int	sig;	/* <0: SIGRTMIN - sig */
		int	code;
		int	value;
	} want[NPEND] = {
		{ SIGUSR1, SI_TKILL, 0 },
		{ SIGUSR2, SI_USER, 0 },
		{ -1, SI_QUEUE, 101 },
		{ -1, SI_QUEUE, 102 },
		{ -1, SI_QUEUE, 103 },
		{ -2, SI_QUEUE, 201 },
		{ -2, SI_QUEUE, 202 },
	};
	sigset_t		 now, none;
	char			 buf[4096];
	unsigned long long	 bit1 = 1ULL << (SIGRTMIN + 1 - 1);
	unsigned long long	 bit2 = 1ULL << (SIGRTMIN + 2 - 1);
	unsigned long long	 m;
	int			 i, sig;

	sigprocmask(SIG_SETMASK, NULL, &now);
	if (!same_set(&now, &pend_mask, &sig))
		fail("signal %d differs in the blocked mask", sig);
	if (read_file("/proc/self/status", buf, sizeof buf) < 0)
		die("/proc/self/status");
	if ((m = status_mask(buf, "\nSigPnd:")) != 1ULL << (SIGUSR1 - 1))
		fail("pending for the thread: %016llx, expected SIGUSR1", m);
	if ((m = status_mask(buf, "\nShdPnd:")) !=
	    ((1ULL << (SIGUSR2 - 1)) | bit1 | bit2))
		fail("pending for the process: %016llx, expected SIGUSR2 "
		    "and SIGRTMIN+1, +2", m);
	if (why[0] != '\0')
		return;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (pend_n != NPEND)
		fail("%d signals delivered, expected %d", pend_n, NPEND);
	for (i = 0; i < NPEND && i < pend_n; i++) {
		sig = want[i].sig < 0 ? SIGRTMIN - want[i].sig : want[i].sig;
		if (pend_got[i].sig != sig || pend_got[i].code !=
		    want[i].code || pend_got[i].value != want[i].value ||
		    pend_got[i].pid != getpid())
			fail("delivery %d: signal %d code %d value %d pid %d, "
			    "expected %d %d %d %d", i, pend_got[i].sig,
			    pend_got[i].code, pend_got[i].value,
			    (int)pend_got[i].pid, sig, want[i].code,
			    want[i].value, (int)getpid());
	}
}

/* ---------------------------------------------------------------- */
/* sigaltstack */

struct alt {
	void			*sp;
	size_t			 size;
	int			 flags;
	volatile uintptr_t	 where;
	volatile int		 inflags;
};

static struct alt	 alt_main, alt_thr;
static pthread_t	 alt_thread;
static atomic_int	 alt_up, alt_go, alt_ran;
static char		 alt_why[256];

static void
alt_handler(int sig, siginfo_t *si, void *uc)
{
	struct alt	*a = gettid() == getpid() ? &alt_main : &alt_thr;
	stack_t		 cur;
	int		 local;

	a->where = (uintptr_t)&local;
	sigaltstack(NULL, &cur);
	a->inflags = cur.ss_flags;
}

static void
alt_on(struct alt *a)
{
	stack_t	ss;

	ss.ss_sp = a->sp;
	ss.ss_size = a->size;
	ss.ss_flags = a->flags;
	if (sigaltstack(&ss, NULL) == -1)
		die("sigaltstack");
}

static const char *
alt_compare(struct alt *a, const char *who)
{
	static char	buf[256];
	stack_t		cur;

	if (sigaltstack(NULL, &cur) == -1)
		return "sigaltstack failed";
	if (cur.ss_sp != a->sp || cur.ss_size != a->size ||
	    cur.ss_flags != a->flags) {
		snprintf(buf, sizeof buf, "%s: alternate stack %p+%zu "
		    "flags %#x, expected %p+%zu flags %#x", who, cur.ss_sp,
		    cur.ss_size, cur.ss_flags, a->sp, a->size, a->flags);
		return buf;
	}
	return NULL;
}

/* What a handler of a saw: on the stack, with the flags expected. */
static const char *
alt_ran_ok(struct alt *a, const char *who, int inflags)
{
	static char	buf[256];
	uintptr_t	lo = (uintptr_t)a->sp;

	if (a->where < lo || a->where >= lo + a->size) {
		snprintf(buf, sizeof buf, "%s: handler ran at %#lx, not on "
		    "its alternate stack", who, (unsigned long)a->where);
		return buf;
	}
	if (a->inflags != inflags) {
		snprintf(buf, sizeof buf, "%s: flags %#x in the handler, "
		    "expected %#x", who, a->inflags, inflags);
		return buf;
	}
	return NULL;
}

static void *
alt_main_thread(void *arg)
{
	const char	*s;

	alt_on(&alt_thr);
	atomic_store(&alt_up, 1);
	wait_flag(&alt_go);
	if ((s = alt_compare(&alt_thr, "thread")) != NULL)
		snprintf(alt_why, sizeof alt_why, "%s", s);
	else {
		raise(SIGUSR1);
		/* Disarmed while on it, armed again after. */
		if ((s = alt_ran_ok(&alt_thr, "thread", SS_DISABLE)) != NULL ||
		    (s = alt_compare(&alt_thr, "thread after")) != NULL)
			snprintf(alt_why, sizeof alt_why, "%s", s);
	}
	atomic_store(&alt_ran, 1);
	return NULL;
}

static void
sigaltstack_setup(void)
{
	struct sigaction	sa;

	alt_main.size = 48 * 1024 + 4096;
	alt_thr.size = 40 * 1024;
	if ((alt_main.sp = mmap(NULL, alt_main.size, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED ||
	    (alt_thr.sp = malloc(alt_thr.size)) == NULL)
		die("alternate stacks");
	alt_thr.flags = SS_AUTODISARM;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = alt_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) == -1)
		die("sigaction");
	alt_on(&alt_main);
	if (pthread_create(&alt_thread, NULL, alt_main_thread, NULL) != 0)
		die("pthread_create");
	while (atomic_load(&alt_up) == 0)
		msleep(5);
}

static void
sigaltstack_perturb(void)
{
	alt_main.size -= 4096;
	alt_on(&alt_main);
	alt_main.size += 4096;
}

static void
sigaltstack_check(void)
{
	const char	*s;

	if ((s = alt_compare(&alt_main, "main")) != NULL)
		fail("%s", s);
	else {
		raise(SIGUSR1);
		if ((s = alt_ran_ok(&alt_main, "main", SS_ONSTACK)) != NULL)
			fail("%s", s);
	}
	atomic_store(&alt_go, 1);
	pthread_join(alt_thread, NULL);
	if (alt_why[0] != '\0')
		fail("%s", alt_why);
}

/* ---------------------------------------------------------------- */
/* posixtimers */

#define NPT	4

static timer_t	pt_id[NPT];
static char	pt_proc[2048];

static void
pt_create(int i, clockid_t clock, int notify, int sig, int value,
    int flags, long value_ns, long interval_ns)
{
	struct sigevent		sev;
	struct itimerspec	its;

	memset(&sev, 0, sizeof sev);
	sev.sigev_notify = notify;
	sev.sigev_signo = sig;
	sev.sigev_value.sival_int = value;
	if (timer_create(clock, &sev, &pt_id[i]) == -1)
		die("timer_create");
	its.it_value.tv_sec = value_ns / 1000000000L;
	its.it_value.tv_nsec = value_ns % 1000000000L;
	its.it_interval.tv_sec = interval_ns / 1000000000L;
	its.it_interval.tv_nsec = interval_ns % 1000000000L;
	if (flags & TIMER_ABSTIME) {
		struct timespec	now;

		clock_gettime(clock, &now);
		its.it_value.tv_sec += now.tv_sec;
		its.it_value.tv_nsec += now.tv_nsec;
		if (its.it_value.tv_nsec >= 1000000000L) {
			its.it_value.tv_sec++;
			its.it_value.tv_nsec -= 1000000000L;
		}
	}
	if (timer_settime(pt_id[i], flags, &its, NULL) == -1)
		die("timer_settime");
}

static void
posixtimers_setup(void)
{
	sigset_t	set;

	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN + 3);
	sigaddset(&set, SIGRTMIN + 4);
	sigprocmask(SIG_BLOCK, &set, NULL);
	/* Periodic and firing; long; SIGEV_NONE; absolute. */
	pt_create(0, CLOCK_MONOTONIC, SIGEV_SIGNAL, SIGRTMIN + 3, 0x5151,
	    0, 300000000L, 100000000L);
	pt_create(1, CLOCK_REALTIME, SIGEV_SIGNAL, SIGRTMIN + 4, 0x7e57,
	    0, 30000000000L, 7000000000L);
	pt_create(2, CLOCK_MONOTONIC, SIGEV_NONE, 0, 0, 0, 100000000000L, 0);
	pt_create(3, CLOCK_BOOTTIME, SIGEV_SIGNAL, SIGRTMIN + 4, 0x3333,
	    TIMER_ABSTIME, 60000000000L, 250000000L);
	if (read_file("/proc/self/timers", pt_proc, sizeof pt_proc) <= 0)
		die("/proc/self/timers");
}

static void
posixtimers_perturb(void)
{
	struct itimerspec	its = { { 8, 0 }, { 30, 0 } };

	timer_settime(pt_id[1], 0, &its, NULL);
}

static void
posixtimers_check(void)
{
	static const long	value[NPT] = { 300000000L, 30000000000L,
				    100000000000L, 60000000000L };
	static const long	interval[NPT] = { 100000000L, 7000000000L, 0,
				    250000000L };
	struct itimerspec	its;
	struct timespec		tmo = { 2, 0 };
	siginfo_t		si;
	sigset_t		set;
	char			buf[2048];
	int			i, n;

	if (read_file("/proc/self/timers", buf, sizeof buf) < 0 ||
	    strcmp(buf, pt_proc) != 0)
		fail("/proc/self/timers differs: '%s', was '%s'", buf,
		    pt_proc);
	for (i = 0; i < NPT; i++) {
		if (timer_gettime(pt_id[i], &its) == -1) {
			fail("timer %d: %s", i, strerror(errno));
			continue;
		}
		if (ts_ns(&its.it_interval) != interval[i])
			fail("timer %d: interval %ld ns, expected %ld", i,
			    ts_ns(&its.it_interval), interval[i]);
		if (ts_ns(&its.it_value) <= 0 ||
		    ts_ns(&its.it_value) > value[i])
			fail("timer %d: %ld ns left of %ld", i,
			    ts_ns(&its.it_value), value[i]);
	}
	if (why[0] != '\0')
		return;
	/* Expirations of the periodic timer go on arriving. */
	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN + 3);
	for (n = 0; n < 2; n++) {
		if (sigtimedwait(&set, &si, &tmo) != SIGRTMIN + 3) {
			fail("expiration %d of timer 0 not delivered: %s", n,
			    strerror(errno));
			return;
		}
		if (si.si_code != SI_TIMER ||
		    si.si_value.sival_int != 0x5151 ||
		    si.si_timerid != (int)(intptr_t)pt_id[0])
			fail("timer 0: code %d value %#x timer %d, expected "
			    "%d %#x %d", si.si_code, si.si_value.sival_int,
			    si.si_timerid, SI_TIMER, 0x5151,
			    (int)(intptr_t)pt_id[0]);
	}
	sigpending(&set);
	if (sigismember(&set, SIGRTMIN + 4))
		fail("a timer that has not expired signalled");
}

/* ---------------------------------------------------------------- */
/* itimers */

static const struct itimerval	it_set[3] = {
	{ { 0, 100000 }, { 0, 300000 } },	/* ITIMER_REAL */
	{ { 3, 0 }, { 10, 0 } },		/* ITIMER_VIRTUAL */
	{ { 4, 500000 }, { 20, 0 } },		/* ITIMER_PROF */
};

static void
itimers_setup(void)
{
	sigset_t	set;
	int		i;

	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	sigaddset(&set, SIGVTALRM);
	sigaddset(&set, SIGPROF);
	sigprocmask(SIG_BLOCK, &set, NULL);
	for (i = 0; i < 3; i++)
		if (setitimer(i, &it_set[i], NULL) == -1)
			die("setitimer %d", i);
}

static void
itimers_perturb(void)
{
	struct itimerval	it = { { 4, 0 }, { 20, 0 } };

	setitimer(ITIMER_PROF, &it, NULL);
}

static void
itimers_check(void)
{
	struct itimerval	it;
	struct timespec		tmo = { 2, 0 };
	siginfo_t		si;
	sigset_t		set;
	int			i, n;

	for (i = 0; i < 3; i++) {
		if (getitimer(i, &it) == -1)
			die("getitimer");
		if (tv_us(&it.it_interval) != tv_us(&it_set[i].it_interval))
			fail("itimer %d: interval %ld us, expected %ld", i,
			    tv_us(&it.it_interval),
			    tv_us(&it_set[i].it_interval));
		/* CPU time is counted in ticks: the value may be one more. */
		if (tv_us(&it.it_value) < 0 ||
		    tv_us(&it.it_value) > tv_us(&it_set[i].it_value) + 50000)
			fail("itimer %d: %ld us left", i,
			    tv_us(&it.it_value));
		/*
		 * An ITIMER_REAL that expired is armed again when its
		 * SIGALRM is taken: till then none is left of it.
		 */
		sigpending(&set);
		if (tv_us(&it.it_value) == 0 &&
		    (i != ITIMER_REAL || !sigismember(&set, SIGALRM)))
			fail("itimer %d: disarmed", i);
	}
	if (why[0] != '\0')
		return;
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	for (n = 0; n < 2; n++)
		if (sigtimedwait(&set, &si, &tmo) != SIGALRM) {
			fail("expiration %d of ITIMER_REAL not delivered", n);
			return;
		}
	sigpending(&set);
	if (sigismember(&set, SIGVTALRM) || sigismember(&set, SIGPROF))
		fail("ITIMER_VIRTUAL or ITIMER_PROF expired");
}

/* ---------------------------------------------------------------- */
/* timerfd */

#define NTFD	3

struct tfdset {
	clockid_t	clock;
	int		flags;		/* timerfd_create */
	int		abs;
	long		value_ns;
	long		interval_ns;
};

static int			 tfd[NTFD];
static int			 ntfd = NTFD;
static const struct tfdset	*tfd_set;

/*
 * The first expires once the process is restored (it leaves 1.5 s for
 * the checkpoint: expired before, it would meet what timerfdexpired
 * tests); the others are long.
 */
static const struct tfdset	tfd_armed[NTFD] = {
	{ CLOCK_MONOTONIC, 0, 0, 1500000000L, 50000000L },
	{ CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC, 0, 50000000000L,
	    10000000000L },
	{ CLOCK_BOOTTIME, TFD_NONBLOCK, 1, 60000000000L, 0 },
};

/* Expired before the checkpoint, its expirations unread. */
static const struct tfdset	tfd_expired[1] = {
	{ CLOCK_MONOTONIC, 0, 0, 10000000L, 50000000L },
};

static void
tfd_arm(void)
{
	struct itimerspec	its;
	struct timespec		now;
	long			v;
	int			i;

	for (i = 0; i < ntfd; i++) {
		if ((tfd[i] = timerfd_create(tfd_set[i].clock,
		    tfd_set[i].flags)) == -1)
			die("timerfd_create");
		v = tfd_set[i].value_ns;
		if (tfd_set[i].abs) {
			clock_gettime(tfd_set[i].clock, &now);
			v += ts_ns(&now);
		}
		its.it_value.tv_sec = v / 1000000000L;
		its.it_value.tv_nsec = v % 1000000000L;
		its.it_interval.tv_sec = tfd_set[i].interval_ns / 1000000000L;
		its.it_interval.tv_nsec = tfd_set[i].interval_ns % 1000000000L;
		if (timerfd_settime(tfd[i], tfd_set[i].abs ?
		    TFD_TIMER_ABSTIME : 0, &its, NULL) == -1)
			die("timerfd_settime");
	}
}

static void
timerfd_setup(void)
{
	tfd_set = tfd_armed;
	tfd_arm();
}

static void
timerfdexpired_setup(void)
{
	struct pollfd	pfd = { 0, POLLIN, 0 };

	tfd_set = tfd_expired;
	ntfd = 1;
	tfd_arm();
	pfd.fd = tfd[0];
	if (poll(&pfd, 1, 2000) != 1)	/* reads nothing */
		die("poll");
}

static void
timerfdexpired_perturb(void)
{
	struct itimerspec	its = { { 0, 0 }, { 0, 0 } };

	timerfd_settime(tfd[0], 0, &its, NULL);
}

static void
timerfd_perturb(void)
{
	struct itimerspec	its;

	memset(&its, 0, sizeof its);
	timerfd_settime(tfd[1], 0, &its, NULL);
}

static void
timerfd_check(void)
{
	struct itimerspec	its;
	struct pollfd		pfd;
	uint64_t		ticks;
	int			i, n, fl;

	for (i = 0; i < ntfd; i++) {
		if (timerfd_gettime(tfd[i], &its) == -1) {
			fail("timerfd %d: %s", i, strerror(errno));
			continue;
		}
		if (ts_ns(&its.it_interval) != tfd_set[i].interval_ns)
			fail("timerfd %d: interval %ld ns, expected %ld", i,
			    ts_ns(&its.it_interval), tfd_set[i].interval_ns);
		/* An expired periodic one goes on to its next period. */
		if (ts_ns(&its.it_value) <= 0 || ts_ns(&its.it_value) >
		    (tfd_set[i].value_ns > tfd_set[i].interval_ns ?
		    tfd_set[i].value_ns : tfd_set[i].interval_ns))
			fail("timerfd %d: %ld ns left", i,
			    ts_ns(&its.it_value));
		fl = fcntl(tfd[i], F_GETFL);
		if (fl == -1 || !!(fl & O_NONBLOCK) !=
		    !!(tfd_set[i].flags & TFD_NONBLOCK))
			fail("timerfd %d: file flags %#x", i, fl);
		fl = fcntl(tfd[i], F_GETFD);
		if (fl == -1 || !!(fl & FD_CLOEXEC) !=
		    !!(tfd_set[i].flags & TFD_CLOEXEC))
			fail("timerfd %d: descriptor flags %#x", i, fl);
	}
	if (why[0] != '\0')
		return;
	/* Not expired: nothing to read. */
	for (i = 1; i < ntfd; i++)
		if (read(tfd[i], &ticks, sizeof ticks) != -1 ||
		    errno != EAGAIN)
			fail("timerfd %d: readable before it expired", i);
	/* The periodic one: expirations, then more of them. */
	for (n = 0; n < 2; n++) {
		pfd.fd = tfd[0];
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 2000) != 1 ||
		    read(tfd[0], &ticks, sizeof ticks) != sizeof ticks ||
		    ticks < 1) {
			fail("timerfd 0: no expiration %d", n);
			return;
		}
	}
}

/* ---------------------------------------------------------------- */
/* cwd, umask */

static char	cwd_path[PATH_MAX];

static void
cwd_setup(void)
{
	char	path[PATH_MAX];

	snprintf(path, sizeof path, "%s/work dir", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/work dir/sub.d", dir);
	if (mkdir(path, 0700) == -1 || chdir(path) == -1 ||
	    getcwd(cwd_path, sizeof cwd_path) == NULL)
		die("cwd '%s'", path);
}

static void
cwd_perturb(void)
{
	if (chdir("..") == -1)
		die("chdir");
}

static void
cwd_check(void)
{
	char	buf[PATH_MAX];
	ssize_t	n;
	struct stat	st;

	if (getcwd(buf, sizeof buf) == NULL || strcmp(buf, cwd_path) != 0)
		fail("cwd '%s', expected '%s'", buf, cwd_path);
	if ((n = readlink("/proc/self/cwd", buf, sizeof buf - 1)) == -1 ||
	    (buf[n] = '\0', strcmp(buf, cwd_path) != 0))
		fail("/proc/self/cwd '%s'", buf);
	if (stat(".", &st) == -1 || (st.st_mode & 07777) != 0700)
		fail("cwd mode %o", (unsigned)st.st_mode);
}

#define UMASK	0027

static void
umask_setup(void)
{
	umask(UMASK);
}

static void
umask_perturb(void)
{
	umask(022);
}

static void
umask_check(void)
{
	char		buf[4096], path[PATH_MAX], *s;
	struct stat	st;
	mode_t		m;
	int		fd;

	if (read_file("/proc/self/status", buf, sizeof buf) < 0 ||
	    (s = strstr(buf, "\nUmask:")) == NULL ||
	    strtol(s + 7, NULL, 8) != UMASK)
		fail("/proc/self/status: umask not %04o", UMASK);
	snprintf(path, sizeof path, "%s/umask.file", dir);
	if ((fd = open(path, O_CREAT | O_WRONLY | O_EXCL | O_CLOEXEC,
	    0666)) == -1 || fstat(fd, &st) == -1)
		die("'%s'", path);
	close(fd);
	if ((st.st_mode & 0777) != (0666 & ~UMASK))
		fail("a new file has mode %03o", (unsigned)st.st_mode & 0777);
	m = umask(0);
	if (m != UMASK)
		fail("umask %04o, expected %04o", (unsigned)m, UMASK);
}

/* ---------------------------------------------------------------- */
/* rlimits */

/* Lowered (raising a hard limit may need CAP_SYS_RESOURCE). */
static const struct {
	int		res;
	rlim_t		cur, max;
} rl_set[] = {
	{ RLIMIT_NOFILE, 777, 999 },
	{ RLIMIT_CORE, 12345 * 1024, 67890 * 1024 },
	{ RLIMIT_CPU, 1000, 2000 },
	{ RLIMIT_FSIZE, (rlim_t)1 << 34, (rlim_t)1 << 35 },
	{ RLIMIT_MSGQUEUE, 400000, 800000 },
	{ RLIMIT_LOCKS, 1000, RLIM_INFINITY },
	{ RLIMIT_SIGPENDING, 5000, 6000 },
	{ RLIMIT_STACK, 6 << 20, 60 << 20 },
	{ RLIMIT_MEMLOCK, 4 << 20, 6 << 20 },
	{ RLIMIT_RTTIME, 1000000, 2000000 },
};
#define NRL	(sizeof rl_set / sizeof rl_set[0])

static struct rlimit	rl_all[RLIM_NLIMITS];

static void
rlimits_setup(void)
{
	struct rlimit	rl;
	size_t		i;

	for (i = 0; i < NRL; i++) {
		if (getrlimit(rl_set[i].res, &rl) == -1)
			die("getrlimit");
		if (rl_set[i].max < rl.rlim_max)
			rl.rlim_max = rl_set[i].max;
		rl.rlim_cur = rl_set[i].cur < rl.rlim_max ? rl_set[i].cur :
		    rl.rlim_max;
		if (setrlimit(rl_set[i].res, &rl) == -1)
			die("setrlimit %d", rl_set[i].res);
	}
	for (i = 0; i < RLIM_NLIMITS; i++)
		if (getrlimit(i, &rl_all[i]) == -1)
			die("getrlimit");
}

static void
rlimits_perturb(void)
{
	struct rlimit	rl = rl_all[RLIMIT_CPU];

	rl.rlim_cur--;
	setrlimit(RLIMIT_CPU, &rl);
}

static void
rlimits_check(void)
{
	struct rlimit	rl;
	size_t		i;

	for (i = 0; i < RLIM_NLIMITS; i++) {
		if (getrlimit(i, &rl) == -1)
			die("getrlimit");
		if (rl.rlim_cur != rl_all[i].rlim_cur ||
		    rl.rlim_max != rl_all[i].rlim_max)
			fail("limit %zu: %llu/%llu, expected %llu/%llu", i,
			    (unsigned long long)rl.rlim_cur,
			    (unsigned long long)rl.rlim_max,
			    (unsigned long long)rl_all[i].rlim_cur,
			    (unsigned long long)rl_all[i].rlim_max);
	}
}

/* ---------------------------------------------------------------- */
/* pgrp: A leads a group, C joins it, B leads a session with G in it in
 * a group of its own, D stays in ours. */

static pid_t	pg_a, pg_b, pg_c, pg_d, pg_g;

static void
idle_forever(void)
{
	for (;;)
		pause();
}

/* pg_fork: a child in group pgid (0: its own), or with session set, a
 * session leader with a child G in a group of its own, whose PID goes
 * down gpipe. Each child writes one byte down rpipe once its own
 * setpgid(2) is done, so that no later change races with it. */
static pid_t
pg_fork(pid_t pgid, int session, int *gpipe, int *rpipe)
{
	pid_t	pid, g;

	if ((pid = fork()) == -1)
		die("fork");
	if (pid != 0) {
		if (!session && setpgid(pid, pgid) == -1 && errno != EACCES)
			die("setpgid");
		return pid;
	}
	if (!session) {
		if (setpgid(0, pgid) == -1)
			_exit(3);
	} else {
		if (setsid() == -1)
			_exit(3);
		if ((g = fork()) == -1)
			_exit(3);
		if (g == 0) {
			close(gpipe[0]);
			close(gpipe[1]);
			close(rpipe[0]);
			close(rpipe[1]);
			setpgid(0, 0);
			idle_forever();
		}
		setpgid(g, g);
		if (write(gpipe[1], &g, sizeof g) != sizeof g)
			_exit(3);
	}
	if (write(rpipe[1], "", 1) != 1)
		_exit(3);
	close(gpipe[0]);
	close(gpipe[1]);
	close(rpipe[0]);
	close(rpipe[1]);
	idle_forever();
	return 0;
}

static void
pgrp_setup(void)
{
	int	p[2], r[2], i;
	char	c;

	if (getsid(0) != getpid())
		die("not a session leader");
	if (pipe2(p, O_CLOEXEC) == -1 || pipe2(r, O_CLOEXEC) == -1)
		die("pipe");
	pg_a = pg_fork(0, 0, p, r);
	pg_c = pg_fork(pg_a, 0, p, r);
	pg_b = pg_fork(0, 1, p, r);
	pg_d = pg_fork(getpgid(0), 0, p, r);
	close(p[1]);
	close(r[1]);
	if (read(p[0], &pg_g, sizeof pg_g) != sizeof pg_g)
		die("the session's child");
	for (i = 0; i < 4; i++)
		if (read(r[0], &c, 1) != 1)
			die("a child did not settle");
	close(p[0]);
	close(r[0]);
	/* Everyone in place. */
	while (getpgid(pg_a) != pg_a || getpgid(pg_c) != pg_a ||
	    getsid(pg_b) != pg_b || getpgid(pg_g) != pg_g)
		msleep(5);
}

static void
pgrp_perturb(void)
{
	setpgid(pg_c, pg_c);
}

static void
pgrp_check(void)
{
	const struct {
		const char	*name;
		pid_t		 pid, pgid, sid, ppid;
	} want[] = {
		{ "root", getpid(), getpid(), getpid(), getppid() },
		{ "A", pg_a, pg_a, getpid(), getpid() },
		{ "C", pg_c, pg_a, getpid(), getpid() },
		{ "B", pg_b, pg_b, pg_b, getpid() },
		{ "G", pg_g, pg_g, pg_b, pg_b },
		{ "D", pg_d, getpid(), getpid(), getpid() },
	};
	char	path[64], buf[1024], *s;
	size_t	i;
	int	ppid;
	pid_t	kids[] = { pg_a, pg_c, pg_b, pg_d };

	for (i = 0; i < sizeof want / sizeof want[0]; i++) {
		if (getpgid(want[i].pid) != want[i].pgid)
			fail("%s (%d): process group %d, expected %d",
			    want[i].name, (int)want[i].pid,
			    (int)getpgid(want[i].pid), (int)want[i].pgid);
		if (getsid(want[i].pid) != want[i].sid)
			fail("%s (%d): session %d, expected %d",
			    want[i].name, (int)want[i].pid,
			    (int)getsid(want[i].pid), (int)want[i].sid);
		snprintf(path, sizeof path, "/proc/%d/stat", (int)want[i].pid);
		if (read_file(path, buf, sizeof buf) <= 0 ||
		    (s = strrchr(buf, ')')) == NULL ||
		    sscanf(s + 2, "%*c %d", &ppid) != 1 ||
		    (i > 0 && ppid != want[i].ppid))
			fail("%s: parent is not %d", want[i].name,
			    (int)want[i].ppid);
		if (i > 0 && task_state(want[i].pid) != 'S')
			fail("%s: state %c", want[i].name,
			    task_state(want[i].pid));
	}
	kill(pg_g, SIGKILL);
	for (i = 0; i < sizeof kids / sizeof kids[0]; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
}

/* ---------------------------------------------------------------- */
/* zombie */

static pid_t	zb_exit, zb_sig, zb_live;

static void
wait_zombie(pid_t pid)
{
	siginfo_t	si;

	memset(&si, 0, sizeof si);
	if (waitid(P_PID, pid, &si, WEXITED | WNOWAIT) == -1)
		die("waitid");
}

static void
zombie_setup(void)
{
	if ((zb_exit = fork()) == -1)
		die("fork");
	if (zb_exit == 0)
		_exit(42);
	if ((zb_sig = fork()) == -1)
		die("fork");
	if (zb_sig == 0) {
		signal(SIGTERM, SIG_DFL);
		raise(SIGTERM);
		_exit(3);
	}
	if ((zb_live = fork()) == -1)
		die("fork");
	if (zb_live == 0)
		idle_forever();
	wait_zombie(zb_exit);
	wait_zombie(zb_sig);
}

static void
zombie_perturb(void)
{
	waitpid(zb_exit, NULL, 0);
}

static void
zombie_check(void)
{
	siginfo_t	si;
	int		st;
	pid_t		p;

	if (task_state(zb_exit) != 'Z' || task_state(zb_sig) != 'Z')
		fail("children in states %c and %c, expected zombies",
		    task_state(zb_exit), task_state(zb_sig));
	if (task_state(zb_live) != 'S')
		fail("live child in state %c", task_state(zb_live));
	memset(&si, 0, sizeof si);
	if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == -1 ||
	    (si.si_pid != zb_exit && si.si_pid != zb_sig))
		fail("waitid: no zombie");
	memset(&si, 0, sizeof si);
	if (waitid(P_PID, zb_exit, &si, WEXITED | WNOHANG | WNOWAIT) == -1 ||
	    si.si_pid != zb_exit || si.si_code != CLD_EXITED ||
	    si.si_status != 42)
		fail("waitid %d: pid %d code %d status %d", (int)zb_exit,
		    (int)si.si_pid, si.si_code, si.si_status);
	if ((p = waitpid(zb_exit, &st, WNOHANG)) != zb_exit ||
	    !WIFEXITED(st) || WEXITSTATUS(st) != 42)
		fail("waitpid %d: %d, status %#x, expected exit 42",
		    (int)zb_exit, (int)p, p > 0 ? st : 0);
	if ((p = waitpid(zb_sig, &st, WNOHANG)) != zb_sig ||
	    !WIFSIGNALED(st) || WTERMSIG(st) != SIGTERM || WCOREDUMP(st))
		fail("waitpid %d: %d, status %#x, expected SIGTERM",
		    (int)zb_sig, (int)p, p > 0 ? st : 0);
	if ((p = waitpid(-1, &st, WNOHANG)) != 0)
		fail("waitpid: %d more exited", (int)p);
	kill(zb_live, SIGKILL);
	if (waitpid(zb_live, &st, 0) != zb_live || !WIFSIGNALED(st))
		fail("the live child was not ours to reap");
	if (waitpid(-1, &st, WNOHANG) != -1 || errno != ECHILD)
		fail("a child is left");
}

/* ---------------------------------------------------------------- */
/* futex */

#define NFX	5

static int		fx_word[3] __attribute__((aligned(64))) = { 7, 17, 27 };
static pthread_mutex_t	fx_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t	fx_held = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t	fx_cond = PTHREAD_COND_INITIALIZER;
static int		fx_pred, fx_value;
static pthread_t	fx_th[NFX];
static pid_t		fx_tid[NFX];
static int		fx_seen[NFX], fx_ret[NFX];
static struct timespec	fx_deadline;

static long
futex(int *uaddr, int op, int val, const struct timespec *ts, int val3)
{
	return syscall(SYS_futex, uaddr, op, val, ts, NULL, val3);
}

static void *
fx_main(void *arg)
{
	int	i = (int)(intptr_t)arg;
	long	r = 0;

	fx_tid[i] = gettid();
	switch (i) {
	case 0:		/* shared */
		while (__atomic_load_n(&fx_word[0], __ATOMIC_SEQ_CST) == 7 &&
		    (r = futex(&fx_word[0], FUTEX_WAIT, 7, NULL, 0)) == -1 &&
		    (errno == EAGAIN || errno == EINTR))
			;
		fx_seen[i] = fx_word[0];
		break;
	case 1:		/* private */
		while (__atomic_load_n(&fx_word[1], __ATOMIC_SEQ_CST) == 17 &&
		    (r = futex(&fx_word[1], FUTEX_WAIT_PRIVATE, 17, NULL,
		    0)) == -1 && (errno == EAGAIN || errno == EINTR))
			;
		fx_seen[i] = fx_word[1];
		break;
	case 2:		/* bitset, absolute CLOCK_REALTIME timeout */
		while (__atomic_load_n(&fx_word[2], __ATOMIC_SEQ_CST) == 27 &&
		    (r = futex(&fx_word[2], FUTEX_WAIT_BITSET_PRIVATE |
		    FUTEX_CLOCK_REALTIME, 27, &fx_deadline, 0x0f0)) == -1 &&
		    (errno == EAGAIN || errno == EINTR))
			;
		fx_seen[i] = fx_word[2];
		break;
	case 3:		/* condition variable */
		pthread_mutex_lock(&fx_mutex);
		while (fx_pred == 0)
			pthread_cond_wait(&fx_cond, &fx_mutex);
		fx_seen[i] = fx_pred;
		pthread_mutex_unlock(&fx_mutex);
		break;
	case 4:		/* a mutex held by the main thread */
		pthread_mutex_lock(&fx_held);
		fx_seen[i] = fx_value;
		pthread_mutex_unlock(&fx_held);
		break;
	}
	fx_ret[i] = r == -1 ? errno : 0;
	return NULL;
}

/* Whether every thread sits in futex(2); *ip the first that does not. */
static int
fx_blocked(int *ip)
{
	int	i;

	for (i = 0; i < NFX; i++)
		if (fx_tid[i] == 0 || task_syscall(fx_tid[i]) != SYS_futex) {
			*ip = i;
			return 0;
		}
	return 1;
}

static void
futex_setup(void)
{
	int	i;

	clock_gettime(CLOCK_REALTIME, &fx_deadline);
	fx_deadline.tv_sec += 60;
	pthread_mutex_lock(&fx_held);
	for (i = 0; i < NFX; i++)
		if (pthread_create(&fx_th[i], NULL, fx_main,
		    (void *)(intptr_t)i) != 0)
			die("pthread_create");
	while (!fx_blocked(&i))
		msleep(5);
}

static void
futex_perturb(void)
{
	pthread_mutex_lock(&fx_mutex);
	fx_pred = 0x66;
	pthread_cond_signal(&fx_cond);
	pthread_mutex_unlock(&fx_mutex);
}

static void
futex_check(void)
{
	static const int	want[NFX] = { 8, 18, 28, 0x77, 0x99 };
	struct timespec		ts;
	int			i, n;

	/* Still blocked where they were (or back there at once). */
	for (n = 0; !fx_blocked(&i) && n < 50; n++)
		msleep(20);
	if (!fx_blocked(&i))
		fail("thread %d is not in futex(2): system call %ld, state %c",
		    i, task_syscall(fx_tid[i]), task_state(fx_tid[i]));
	for (i = 0; i < 3; i++) {
		__atomic_store_n(&fx_word[i], fx_word[i] + 1,
		    __ATOMIC_SEQ_CST);
		futex(&fx_word[i], i == 0 ? FUTEX_WAKE : i == 1 ?
		    FUTEX_WAKE_PRIVATE : FUTEX_WAKE_BITSET_PRIVATE, 1, NULL,
		    0x0f0);
	}
	pthread_mutex_lock(&fx_mutex);
	fx_pred = 0x77;
	pthread_cond_signal(&fx_cond);
	pthread_mutex_unlock(&fx_mutex);
	fx_value = 0x99;
	pthread_mutex_unlock(&fx_held);
	for (i = 0; i < NFX; i++) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 3;
		if (pthread_timedjoin_np(fx_th[i], NULL, &ts) != 0) {
			fail("thread %d was not woken", i);
			continue;
		}
		if (fx_seen[i] != want[i])
			fail("thread %d saw %#x, expected %#x", i, fx_seen[i],
			    want[i]);
		if (fx_ret[i] != 0 && fx_ret[i] != EAGAIN)
			fail("thread %d: futex: %s", i, strerror(fx_ret[i]));
	}
}

/* ---------------------------------------------------------------- */
/* per-process attributes */

#define COMM	"st-renamed.x"

static void
comm_setup(void)
{
	if (prctl(PR_SET_NAME, COMM) == -1)
		die("PR_SET_NAME");
}

static void
comm_perturb(void)
{
	prctl(PR_SET_NAME, "other");
}

static void
comm_check(void)
{
	char	name[32], buf[64];

	if (prctl(PR_GET_NAME, name) == -1 || strcmp(name, COMM) != 0)
		fail("name '%s', expected '%s'", name, COMM);
	if (read_file("/proc/self/comm", buf, sizeof buf) < 0 ||
	    strcmp(buf, COMM "\n") != 0)
		fail("/proc/self/comm '%s'", buf);
}

#define PERSONA	(PER_LINUX | ADDR_NO_RANDOMIZE | UNAME26)

static void
personality_setup(void)
{
	if (personality(PERSONA) == -1)
		die("personality");
}

static void
personality_perturb(void)
{
	personality(PER_LINUX | ADDR_NO_RANDOMIZE);
}

static void
personality_check(void)
{
	int	p = personality(0xffffffff);

	if (p != PERSONA)
		fail("personality %#x, expected %#x", p, PERSONA);
}

static void
nonewprivs_setup(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		die("PR_SET_NO_NEW_PRIVS");
}

static void
nonewprivs_perturb(void)
{
	/* It cannot be cleared: no negative control. */
}

static void
nonewprivs_check(void)
{
	char	buf[4096], *s;

	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		fail("no_new_privs is not set");
	if (read_file("/proc/self/status", buf, sizeof buf) < 0 ||
	    (s = strstr(buf, "\nNoNewPrivs:")) == NULL ||
	    atoi(s + 12) != 1)
		fail("/proc/self/status: NoNewPrivs not 1");
}

static volatile sig_atomic_t	pd_count;

static void
pd_handler(int sig)
{
	pd_count++;
}

static void
pdeathsig_setup(void)
{
	struct sigaction	sa;

	/*
	 * Our parent changes across a restore: the signal is caught so
	 * that it may come; what is checked is that it is still set.
	 */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = pd_handler;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR2, &sa, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGUSR2) == -1)
		die("PR_SET_PDEATHSIG");
}

static void
pdeathsig_perturb(void)
{
	prctl(PR_SET_PDEATHSIG, SIGWINCH);
}

static void
pdeathsig_check(void)
{
	int	sig = -1;

	if (prctl(PR_GET_PDEATHSIG, &sig) == -1 || sig != SIGUSR2)
		fail("parent death signal %d, expected %d", sig, SIGUSR2);
}

static void
dumpable_setup(void)
{
	if (prctl(PR_SET_DUMPABLE, 0) == -1)
		die("PR_SET_DUMPABLE");
}

static void
dumpable_perturb(void)
{
	prctl(PR_SET_DUMPABLE, 1);
}

static void
dumpable_check(void)
{
	int	d = prctl(PR_GET_DUMPABLE);

	if (d != 0)
		fail("dumpable %d, expected 0", d);
}

static void
subreaper_setup(void)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) == -1)
		die("PR_SET_CHILD_SUBREAPER");
}

static void
subreaper_perturb(void)
{
	prctl(PR_SET_CHILD_SUBREAPER, 0);
}

static void
subreaper_check(void)
{
	int	v = -1;

	if (prctl(PR_GET_CHILD_SUBREAPER, &v) == -1 || v != 1)
		fail("child subreaper %d, expected 1", v);
}

static void
thpdisable_setup(void)
{
	if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == -1)
		die("PR_SET_THP_DISABLE");
}

static void
thpdisable_perturb(void)
{
	prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
}

static void
thpdisable_check(void)
{
	char	buf[4096], *s;

	if (prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) != 1)
		fail("THP not disabled");
	if (read_file("/proc/self/status", buf, sizeof buf) < 0 ||
	    (s = strstr(buf, "\nTHP_enabled:")) == NULL || atoi(s + 13) != 0)
		fail("/proc/self/status: THP_enabled not 0");
}

/* ---------------------------------------------------------------- */

#define CASE(n)	{ #n, n##_setup, n##_perturb, n##_check }

static const struct scase	cases[] = {
	CASE(threads), CASE(fpu), CASE(sigaction), CASE(sigpending),
	CASE(sigaltstack), CASE(posixtimers), CASE(itimers), CASE(timerfd),
	{ "timerfdexpired", timerfdexpired_setup, timerfdexpired_perturb,
	    timerfd_check },
	CASE(cwd), CASE(umask), CASE(rlimits), CASE(pgrp), CASE(zombie),
	CASE(futex), CASE(comm), CASE(personality), CASE(nonewprivs),
	CASE(pdeathsig), CASE(dumpable), CASE(subreaper), CASE(thpdisable),
};

int
main(int argc, char *argv[])
{
	const struct scase	*c = NULL;
	const char		*p;
	char			 buf[PATH_MAX + 64];
	size_t			 i;

	if (argc != 3) {
		fprintf(stderr, "usage: stateproc case dir\n");
		return 2;
	}
	casename = argv[1];
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (strcmp(cases[i].name, casename) == 0)
			c = &cases[i];
	if (c == NULL) {
		fprintf(stderr, "stateproc: unknown case '%s'\n", casename);
		return 2;
	}
	dir = argv[2];
	close_inherited();
	c->setup();
	snprintf(buf, sizeof buf, "%d\n", (int)getpid());
	put_file("ready", buf);
	if ((p = getenv("PERTURB")) != NULL && strcmp(p, "1") == 0)
		c->perturb();
	snprintf(buf, sizeof buf, "%s/go", dir);
	while (access(buf, F_OK) != 0)
		msleep(20);
	c->check();
	if (why[0] == '\0')
		snprintf(buf, sizeof buf, "ok %s\n", casename);
	else
		snprintf(buf, sizeof buf, "FAIL %s: %s\n", casename, why);
	put_file("result", buf);
	return why[0] == '\0' ? 0 : 1;
}
