/*
 * zeropages -- a parent and a child whose memory holds zero pages of
 * every kind a checkpoint treats apart.
 *
 * usage: zeropages -f statusfile -d dir
 *
 * Before it forks, the parent maps
 *	C	8 MiB of private anonymous memory, filled with a pattern,
 *		which the child inherits
 *	D	a private mapping of dir/zeropages.file, 1 MiB of bytes 0xa5:
 *		pages 0-127 written with zeros, 128-191 with a pattern,
 *		192-255 left as the file has them
 *	E	1 MiB of shared anonymous memory, the even pages zero and the
 *		odd ones a pattern
 * After the fork the child writes zeros over the even pages of C, and
 * the parent over the pages of C whose number is 1 modulo 4; then the
 * parent maps
 *	A	16 MiB of private anonymous memory, each page filled with a
 *		pattern and then, by its number modulo 8: 0 and 6 left so,
 *		1, 3 and 5 zeroed, 2 zeroed but for its last byte, 4 but for
 *		byte 64, 7 but for byte 2048
 *	B	4 MiB of private anonymous memory, never touched
 * and appends
 *	ready pid=PID child=PID a=ADDR b=ADDR c=ADDR d=ADDR e=ADDR
 * to statusfile (addresses in hexadecimal).  On SIGUSR1 each process
 * checks every page of what it sees of A to E and appends
 *	verify parent ok	(or verify child ok)
 * or "verify parent FAIL region R page N".  Descriptors above 2 are
 * closed first.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/mman.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/work.h"

#define PG	4096
#define NA	4096		/* pages of each region */
#define NB	1024
#define NC	2048
#define ND	256
#define NE	256

static int	 zero_but(const unsigned char *, size_t, unsigned char);
static int	 a_ok(const unsigned char *, size_t);
static int	 check(int);
static void	*map(size_t, int, int);

static unsigned char	*ra, *rb, *rc, *rd, *re;

/* Whether page p is zero but for its byte at (none if PG), which is v. */
static int
zero_but(const unsigned char *p, size_t at, unsigned char v)
{
	size_t	i;

	for (i = 0; i < PG; i++)
		if (p[i] != (i == at ? v : 0))
			return 0;
	return 1;
}

/* Whether page n of A is as it was left. */
static int
a_ok(const unsigned char *p, size_t n)
{
	switch (n % 8) {
	case 0:
	case 6:
		return work_page_is(p, 'A', n);
	case 2:
		return zero_but(p, PG - 1, 0x5a);
	case 4:
		return zero_but(p, 64, 1);
	case 7:
		return zero_but(p, 2048, 1);
	default:
		return zero_but(p, PG, 0);
	}
}

/* Checks everything; child says which process this is. */
static int
check(int child)
{
	const char	*who = child ? "child" : "parent";
	size_t		 n;
	int		 ok;

	for (n = 0; !child && n < NA; n++)
		if (!a_ok(ra + n * PG, n)) {
			work_status("verify %s FAIL region A page %zu", who, n);
			return -1;
		}
	for (n = 0; !child && n < NB; n++)
		if (!zero_but(rb + n * PG, PG, 0)) {
			work_status("verify %s FAIL region B page %zu", who, n);
			return -1;
		}
	for (n = 0; n < NC; n++) {
		if (child)
			ok = n % 2 == 0 ? zero_but(rc + n * PG, PG, 0) :
			    work_page_is(rc + n * PG, 'C', n);
		else
			ok = n % 4 == 1 ? zero_but(rc + n * PG, PG, 0) :
			    work_page_is(rc + n * PG, 'C', n);
		if (!ok) {
			work_status("verify %s FAIL region C page %zu", who, n);
			return -1;
		}
	}
	for (n = 0; n < ND; n++) {
		if (n < 128)
			ok = zero_but(rd + n * PG, PG, 0);
		else if (n < 192)
			ok = work_page_is(rd + n * PG, 'D', n);
		else
			ok = rd[n * PG] == 0xa5 &&
			    memcmp(rd + n * PG, rd + n * PG + 1, PG - 1) == 0;
		if (!ok) {
			work_status("verify %s FAIL region D page %zu", who, n);
			return -1;
		}
	}
	for (n = 0; n < NE; n++)
		if (!(n % 2 == 0 ? zero_but(re + n * PG, PG, 0) :
		    work_page_is(re + n * PG, 'E', n))) {
			work_status("verify %s FAIL region E page %zu", who, n);
			return -1;
		}
	work_status("verify %s ok", who);
	return 0;
}

static void *
map(size_t len, int flags, int fd)
{
	void	*p;

	p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, 0);
	if (p == MAP_FAILED) {
		work_status("error mmap: %s", strerror(errno));
		exit(1);
	}
	/*
	 * Small pages only: the kernel may split a huge page whose pages
	 * are mostly zeros and map the shared zero page in their place.
	 */
	(void)madvise(p, len, MADV_NOHUGEPAGE);
	return p;
}

int
main(int argc, char **argv)
{
	unsigned char	 buf[PG];
	const char	*dir = NULL;
	char		 path[4096], c;
	pid_t		 child;
	size_t		 n;
	int		 ch, fd, p[2];

	while ((ch = getopt(argc, argv, "d:f:")) != -1) {
		switch (ch) {
		case 'd':
			dir = optarg;
			break;
		case 'f':
			work_statusfile = optarg;
			break;
		default:
			fprintf(stderr, "usage: zeropages -f statusfile "
			    "-d dir\n");
			return 2;
		}
	}
	if (work_statusfile == NULL || dir == NULL) {
		fprintf(stderr, "usage: zeropages -f statusfile -d dir\n");
		return 2;
	}
	work_close_inherited();
	work_signals(0);

	snprintf(path, sizeof path, "%s/zeropages.file", dir);
	memset(buf, 0xa5, sizeof buf);
	if ((fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600)) == -1) {
		work_status("error %s: %s", path, strerror(errno));
		return 1;
	}
	for (n = 0; n < ND; n++)
		if (write(fd, buf, PG) != PG) {
			work_status("error %s: %s", path, strerror(errno));
			return 1;
		}
	rc = map((size_t)NC * PG, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	rd = map((size_t)ND * PG, MAP_PRIVATE, fd);
	re = map((size_t)NE * PG, MAP_SHARED | MAP_ANONYMOUS, -1);
	close(fd);
	for (n = 0; n < NC; n++)
		work_page_fill(rc + n * PG, 'C', n);
	memset(rd, 0, 128 * PG);
	for (n = 128; n < 192; n++)
		work_page_fill(rd + n * PG, 'D', n);
	for (n = 0; n < NE; n++)
		if (n % 2 == 1)
			work_page_fill(re + n * PG, 'E', n);

	if (pipe(p) == -1 || (child = fork()) == -1) {
		work_status("error fork: %s", strerror(errno));
		return 1;
	}
	if (child == 0) {
		close(p[0]);
		for (n = 0; n < NC; n += 2)
			memset(rc + n * PG, 0, PG);
		if (write(p[1], "r", 1) != 1)
			_exit(1);
		close(p[1]);
		for (;;) {
			if (work_want_verify) {
				work_want_verify = 0;
				check(1);
			}
			work_msleep(20);
		}
	}
	close(p[1]);
	for (n = 1; n < NC; n += 4)
		memset(rc + n * PG, 0, PG);
	ra = map((size_t)NA * PG, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	rb = map((size_t)NB * PG, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	for (n = 0; n < NA; n++) {
		work_page_fill(ra + n * PG, 'A', n);
		if (n % 8 != 0 && n % 8 != 6)
			memset(ra + n * PG, 0, PG);
		if (n % 8 == 2)
			ra[n * PG + PG - 1] = 0x5a;
		else if (n % 8 == 4)
			ra[n * PG + 64] = 1;
		else if (n % 8 == 7)
			ra[n * PG + 2048] = 1;
	}
	if (read(p[0], &c, 1) != 1) {
		work_status("error the child did not start");
		return 1;
	}
	close(p[0]);
	work_status("ready pid=%ld child=%ld a=%" PRIxPTR " b=%" PRIxPTR
	    " c=%" PRIxPTR " d=%" PRIxPTR " e=%" PRIxPTR, (long)getpid(),
	    (long)child, (uintptr_t)ra, (uintptr_t)rb, (uintptr_t)rc,
	    (uintptr_t)rd, (uintptr_t)re);
	for (;;) {
		if (work_want_verify) {
			work_want_verify = 0;
			check(0);
		}
		work_msleep(20);
	}
}
