/*
 * Unit tests for the image streamer (streamer.c, serve.c, sock.c): a
 * child plays criu's side of criu --stream's socket, as criu's
 * img-streamer.c speaks it: it connects to the socket in the images
 * directory, sends a length-prefixed request naming a file, and passes
 * one end of a pipe; when restoring it first reads the answer saying
 * whether the file exists.
 */

#include "config.h"

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "unit.h"
#include "private.h"
#include "criu/criu.h"
#include "criu/streamer.h"
#include "image/image.h"
#include "criu/criu-images.pb-c.h"

#define PART		(64u << 10)
#define NPAGES		(3 * PART + 5000)	/* pages-1.img: four parts */
#define NINV		300			/* inventory.img */

static void	fill(char *, size_t, unsigned);
static int	criu_connect(const char *, const char *);
static int	criu_request(int, const char *);
static int	criu_pass(int, int);
static int	criu_write(int, const char *, const char *, size_t);
static int	criu_answer(int);
static int	criu_read(int, const char *, const char *, size_t);
static void	fake_dump(const char *, const char *);
static void	fake_restore(const char *);
static pid_t	fake_criu_start(const struct unit *, const char *);
static int	make_image(struct gck_ctx *);
static void	t_capture(void **);
static void	t_serve(void **);

/* Bytes of a pattern of its own for each seed. */
static void
fill(char *buf, size_t len, unsigned seed)
{
	size_t	i;

	for (i = 0; i < len; i++)
		buf[i] = (char)((i * 31 + seed * 7 + i / 4096) & 0xff);
}

/* Connects to dir/name, as criu does with --stream. */
static int
criu_connect(const char *dir, const char *name)
{
	struct sockaddr_un	sun;
	int			s;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s/%s", dir, name);
	if ((s = socket(AF_UNIX, SOCK_STREAM, 0)) == -1)
		return -1;
	if (connect(s, (struct sockaddr *)&sun, sizeof sun) == -1) {
		close(s);
		return -1;
	}
	return s;
}

/* Sends the request for file name: its length, then the message. */
static int
criu_request(int s, const char *name)
{
	ImgStreamerRequestEntry	req = IMG_STREAMER_REQUEST_ENTRY__INIT;
	unsigned char		buf[512];
	uint32_t		len;

	req.filename = (char *)name;
	len = (uint32_t)img_streamer_request_entry__get_packed_size(&req);
	if (len + sizeof len > sizeof buf)
		return -1;
	memcpy(buf, &len, sizeof len);
	img_streamer_request_entry__pack(&req, buf + sizeof len);
	return send(s, buf, sizeof len + len, MSG_NOSIGNAL) ==
	    (ssize_t)(sizeof len + len) ? 0 : -1;
}

/* Passes fd (SCM_RIGHTS, with one byte), then closes it. */
static int
criu_pass(int s, int fd)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	}		 cm;
	struct msghdr	 mh;
	struct iovec	 iov;
	struct cmsghdr	*c;
	char		 dummy = '\0';
	int		 r;

	memset(&mh, 0, sizeof mh);
	memset(&cm, 0, sizeof cm);
	iov.iov_base = &dummy;
	iov.iov_len = 1;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof cm.buf;
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	r = sendmsg(s, &mh, MSG_NOSIGNAL) == 1 ? 0 : -1;
	close(fd);
	return r;
}

/* criu dump opens file name: asks, passes the read end, writes. */
static int
criu_write(int s, const char *name, const char *data, size_t len)
{
	size_t	off;
	ssize_t	n;
	int	p[2];

	if (criu_request(s, name) == -1 || pipe(p) == -1 ||
	    criu_pass(s, p[0]) == -1)
		return -1;
	for (off = 0; off < len; off += (size_t)n)
		if ((n = write(p[1], data + off, len - off)) <= 0) {
			close(p[1]);
			return -1;
		}
	close(p[1]);
	return 0;
}

/* Reads the streamer's answer: 1 if the file exists, 0 if not, -1. */
static int
criu_answer(int s)
{
	ImgStreamerReplyEntry	*rep;
	unsigned char		 buf[64];
	uint32_t		 len;
	int			 exists;

	if (recv(s, &len, sizeof len, MSG_WAITALL) != (ssize_t)sizeof len ||
	    len > sizeof buf ||
	    recv(s, buf, len, MSG_WAITALL) != (ssize_t)len ||
	    (rep = img_streamer_reply_entry__unpack(NULL, len, buf)) == NULL)
		return -1;
	exists = rep->exists ? 1 : 0;
	img_streamer_reply_entry__free_unpacked(rep, NULL);
	return exists;
}

/*
 * criu restore opens file name: asks, and if it exists, passes the
 * write end and reads.  Returns 0 when it reads want (len bytes), 1 when
 * the file does not exist and want is NULL, else -1.
 */
static int
criu_read(int s, const char *name, const char *want, size_t len)
{
	char	*got;
	size_t	 off = 0;
	ssize_t	 n;
	int	 p[2], e, r = -1;

	if (criu_request(s, name) == -1 || (e = criu_answer(s)) == -1)
		return -1;
	if (e == 0)
		return want == NULL ? 1 : -1;
	if (want == NULL || pipe(p) == -1 || criu_pass(s, p[1]) == -1 ||
	    (got = malloc(len + 1)) == NULL)
		return -1;
	while (off <= len && (n = read(p[0], got + off, len + 1 - off)) > 0)
		off += (size_t)n;
	if (off == len && memcmp(got, want, len) == 0)
		r = 0;
	free(got);
	close(p[0]);
	return r;
}

/*
 * criu dump: writes inventory.img, pagemap-77.img and the pages it
 * announces, then runs its post-dump action script, which asks to go
 * on.  Exits 0 when the answer is yes.
 */
static void
fake_dump(const char *dir, const char *hook)
{
	static char	 pages[NPAGES];
	char		 inv[NINV], pm[100];
	int		 s;

	fill(inv, sizeof inv, 1);
	fill(pm, sizeof pm, 2);
	fill(pages, sizeof pages, 3);
	if ((s = criu_connect(dir, "streamer-capture.sock")) == -1 ||
	    criu_write(s, "inventory.img", inv, sizeof inv) == -1 ||
	    criu_write(s, "pagemap-77.img", pm, sizeof pm) == -1 ||
	    criu_write(s, "pages-1.img", pages, sizeof pages) == -1)
		_exit(2);
	if (setenv("GCK_CRIU_HOOK", hook, 1) == -1 ||
	    setenv("CRTOOLS_SCRIPT_ACTION", "post-dump", 1) == -1)
		_exit(3);
	_exit(gck_dump_hook() == GCK_OK ? 0 : 4);
}

/*
 * criu restore: reads inventory.img, asks for a file the image lacks,
 * then reads pages-1.img.
 */
static void
fake_restore(const char *dir)
{
	static char	 pages[NPAGES];
	char		 inv[NINV];
	int		 s;

	fill(inv, sizeof inv, 1);
	fill(pages, sizeof pages, 3);
	if ((s = criu_connect(dir, "streamer-serve.sock")) == -1)
		_exit(2);
	if (criu_read(s, "inventory.img", inv, sizeof inv) != 0)
		_exit(3);
	if (criu_read(s, "seccomp.img", NULL, 0) != 1)
		_exit(4);
	if (criu_read(s, "pages-1.img", pages, sizeof pages) != 0)
		_exit(5);
	close(s);
	_exit(0);
}

/* Starts the fake criu: dumping (its hook's socket in hook) or not. */
static pid_t
fake_criu_start(const struct unit *u, const char *hook)
{
	pid_t	pid;

	if ((pid = fork()) == 0) {
		if (hook != NULL)
			fake_dump(u->dir, hook);
		fake_restore(u->dir);
	}
	assert_int_not_equal(pid, -1);
	return pid;
}

/* Capture: the files criu writes, the pages only counted and sampled. */
static void
t_capture(void **state)
{
	struct unit		*u = *state;
	struct gck_capture	*c;
	struct gck_criu_run	 run = { 0, NULL };
	const struct gck_sfile	*f;
	static char		 pages[NPAGES];
	char			 inv[NINV];
	size_t			 i, len;
	int			 status;

	fill(inv, sizeof inv, 1);
	fill(pages, sizeof pages, 3);
	assert_gck_ok(u->ctx, gck_capture_open(u->ctx, u->dir, u->dir, PART,
	    &c));
	run.pid = fake_criu_start(u, gck_capture_hook_path(c));
	assert_gck_ok(u->ctx, gck_capture_run(c, &run));
	assert_true(gck_capture_hooked(c));
	gck_capture_answer(c, 1);
	assert_int_equal(waitpid(run.pid, &status, 0), run.pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	assert_int_equal(gck_capture_nfiles(c), 3);
	assert_non_null(f = gck_capture_find(c, "inventory.img"));
	assert_false(f->pages);
	assert_int_equal(f->len, NINV);
	assert_memory_equal(f->data, inv, NINV);
	assert_non_null(f = gck_capture_find(c, "pagemap-77.img"));
	assert_int_equal(f->size, 100);
	assert_non_null(f = gck_capture_find(c, "pages-1.img"));
	assert_true(f->pages);
	assert_int_equal(f->pid, 77);
	assert_int_equal(f->size, NPAGES);
	assert_int_equal(f->len, 0);
	assert_int_equal(f->ndigests, 4);
	for (i = 0; i < f->ndigests; i++) {
		len = NPAGES - i * PART < PART ? NPAGES - i * PART : PART;
		assert_true(f->digests[i] ==
		    gck_sample_digest(pages + i * PART, len));
	}
	gck_capture_free(c);
}

/* An image of inventory.img and pages-1.img, on a memory file. */
static int
make_image(struct gck_ctx *ctx)
{
	static char		 pages[NPAGES];
	static const char	 manifest[] =
	    "{\"format\": 1, \"tool\": \"gpuckpt 0.1.0\", "
	    "\"created\": \"2025-01-02T03:04:05Z\", \"root_pid\": 77, "
	    "\"shell_job\": false, "
	    "\"processes\": [{\"pid\": 77, \"comm\": \"sleeper\"}], "
	    "\"part_size\": 65536, \"files\": ["
	    "{\"name\": \"inventory.img\", \"size\": 300, \"memory\": false},"
	    "{\"name\": \"pages-1.img\", \"size\": 201608, \"memory\": true}"
	    "]}";
	struct gck_writer	*w;
	char			 inv[NINV];
	int			 fd, dfd;

	fill(inv, sizeof inv, 1);
	fill(pages, sizeof pages, 3);
	assert_int_not_equal(fd = unit_memfd(NULL, 0), -1);
	assert_gck_ok(ctx, gck_writer_new2(ctx, fd, 0, PART, 1, 0, &w));
	assert_gck_ok(ctx, gck_writer_add(w, "gpuckpt.json", manifest,
	    strlen(manifest)));
	assert_int_not_equal(dfd = unit_memfd(inv, sizeof inv), -1);
	assert_gck_ok(ctx, gck_writer_add_file(w, "inventory.img", dfd));
	close(dfd);
	assert_int_not_equal(dfd = unit_memfd(pages, sizeof pages), -1);
	assert_gck_ok(ctx, gck_writer_add_file(w, "pages-1.img", dfd));
	close(dfd);
	assert_gck_ok(ctx, gck_writer_finish(w));
	gck_writer_free(w);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

/*
 * Serve: criu reads a file read ahead, asks for one the image lacks
 * (answered that it does not exist, with no pipe), and reads the pages
 * as the image yields them.
 */
static void
t_serve(void **state)
{
	struct unit			*u = *state;
	struct gck_reader		*rd;
	struct gck_serve		*s;
	const struct gck_manifest	*m;
	struct gck_criu_run		 run = { 0, NULL };
	int				 fd, status;

	assert_int_equal(NPAGES, 201608);
	fd = make_image(u->ctx);
	assert_gck_ok(u->ctx, gck_reader_new(u->ctx, fd, &rd));
	assert_gck_ok(u->ctx, gck_reader_head(rd, &m));
	assert_gck_ok(u->ctx, gck_serve_open(u->ctx, u->dir, m, &s));
	assert_gck_ok(u->ctx, gck_serve_preload(s, rd));
	run.pid = fake_criu_start(u, NULL);
	assert_gck_ok(u->ctx, gck_serve_run(s, rd, &run));
	assert_int_equal(waitpid(run.pid, &status, 0), run.pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	gck_serve_free(s);
	gck_reader_free(rd);
	close(fd);
}

int
main(void)
{
	static const struct CMUnitTest	tests[] = {
		cmocka_unit_test_setup_teardown(t_capture, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(t_serve, unit_setup,
		    unit_teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
