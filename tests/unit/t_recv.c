/*
 * Unit tests for the receiving end of gpusend: gck_recv() storing an
 * image sent in frames, resuming one, refusing what is wrong, and
 * telling the outcome of a hand-over.  The frames are built here by
 * hand, from the layout gpurecv(1) documents, into a memory file that
 * stands for the connection; what gck_recv() answers is read back from
 * another.
 */

#include "config.h"

#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <jansson.h>
#include <xxhash.h>

#include "gpuckpt.h"
#include "image/image.h"
#include "transport/frame.h"
#include "unit.h"

#define HDR	16
#define PATHLEN	(PATH_MAX + 64)	/* a path in the scratch directory */
#define ID	"0123456789abcdef0123456789abcdef"

struct fixture {
	struct unit	 u;		/* the context and scratch directory */
	char		*image;		/* a valid image */
	size_t		 ilen;
};

static const char manifest[] =
    "{\"format\": 1, \"tool\": \"gpuckpt 0.1.0\", "
    "\"created\": \"2025-01-02T03:04:05Z\", \"root_pid\": 4242, "
    "\"processes\": [{\"pid\": 4242, \"comm\": \"sleeper\"}], "
    "\"part_size\": 65536}";

/* Builds an image of about 300 KiB of CRIU files, zstd-compressed. */
static char *
make_image(struct gck_ctx *ctx, size_t *lenp)
{
	struct gck_writer	*w;
	struct stat		 st;
	char			*data, *img;
	size_t			 i, n = 300000;
	int			 fd, dfd;

	fd = unit_memfd_ok(NULL, 0);
	assert_int_not_equal(fd, -1);
	assert_int_equal(gck_writer_new2(ctx, fd, 3, 65536, 1, 0, &w), GCK_OK);
	assert_int_equal(gck_writer_add(w, "gpuckpt.json", manifest,
	    strlen(manifest)), GCK_OK);
	assert_non_null(data = malloc(n));
	srand(7);
	for (i = 0; i < n; i++)
		data[i] = (char)(rand() >> 7);
	dfd = unit_memfd_ok(NULL, 0);
	assert_int_equal(write(dfd, data, n), (ssize_t)n);
	assert_int_equal(lseek(dfd, 0, SEEK_SET), 0);
	free(data);
	assert_int_equal(gck_writer_add_file(w, "pages-1.img", dfd), GCK_OK);
	close(dfd);
	assert_int_equal(gck_writer_finish(w), GCK_OK);
	gck_writer_free(w);
	assert_int_equal(fstat(fd, &st), 0);
	assert_non_null(img = malloc((size_t)st.st_size));
	assert_int_equal(pread(fd, img, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*lenp = (size_t)st.st_size;
	return img;
}

static int
setup(void **state)
{
	struct fixture	*f;

	if ((f = calloc(1, sizeof *f)) == NULL)
		return -1;
	if (unit_init(&f->u) == -1) {
		free(f);
		return -1;
	}
	f->image = make_image(f->u.ctx, &f->ilen);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture	*f = *state;

	unit_release(&f->u);
	free(f->image);
	free(f);
	return 0;
}

/* The connection as gpusend writes it. */
struct wire {
	int	fd;
	uint64_t seq;
};

static void
be(unsigned char *p, uint64_t v, int n)
{
	int	i;

	for (i = n - 1; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static void
frame(struct wire *w, int type, uint64_t seq, const void *data, size_t len)
{
	unsigned char	hdr[HDR];

	hdr[0] = 'G';
	hdr[1] = (unsigned char)type;
	hdr[2] = hdr[3] = 0;
	be(hdr + 4, len, 4);
	be(hdr + 8, seq, 8);
	assert_int_equal(write(w->fd, hdr, HDR), HDR);
	if (len > 0)
		assert_int_equal(write(w->fd, data, len), (ssize_t)len);
}

/* Starts the connection on fd with the START frame whose JSON is start. */
static void
wire_begin(struct wire *w, int fd, const char *start)
{
	assert_int_not_equal(fd, -1);
	w->fd = fd;
	w->seq = 0;
	frame(w, 'O', 0, start, strlen(start));
}

static void
wire_start(struct wire *w, uint64_t offset)
{
	char	buf[64];

	snprintf(buf, sizeof buf, "{\"offset\":%llu}",
	    (unsigned long long)offset);
	wire_begin(w, unit_memfd_ok(NULL, 0), buf);
}

/* Sends data[from, to) in data frames of at most chunk bytes. */
static void
wire_data(struct wire *w, const char *data, size_t from, size_t to,
    size_t chunk)
{
	size_t	n;

	for (; from < to; from += n) {
		n = to - from < chunk ? to - from : chunk;
		frame(w, 'D', w->seq++, data + from, n);
	}
}

static void
wire_end(struct wire *w, uint64_t total)
{
	char	buf[64];

	snprintf(buf, sizeof buf, "{\"bytes\":%llu}",
	    (unsigned long long)total);
	frame(w, 'E', w->seq, buf, strlen(buf));
}

/* The answers: each frame's type and JSON, at most 4. */
struct answers {
	int	 n;
	int	 type[4];
	json_t	*o[4];
};

static void
answers_read(int fd, struct answers *a)
{
	unsigned char	 hdr[HDR];
	char		*buf;
	uint32_t	 len;

	memset(a, 0, sizeof *a);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	while (read(fd, hdr, HDR) == HDR) {
		assert_int_equal(hdr[0], 'G');
		len = (uint32_t)hdr[4] << 24 | (uint32_t)hdr[5] << 16 |
		    (uint32_t)hdr[6] << 8 | hdr[7];
		assert_true(len < 65536);
		assert_non_null(buf = malloc(len + 1));
		assert_int_equal(read(fd, buf, len), (ssize_t)len);
		assert_true(a->n < 4);
		a->type[a->n] = hdr[1];
		a->o[a->n] = json_loadb(buf, len, 0, NULL);
		assert_non_null(a->o[a->n]);
		a->n++;
		free(buf);
	}
}

static void
answers_free(struct answers *a)
{
	int	i;

	for (i = 0; i < a->n; i++)
		json_decref(a->o[i]);
}

/* Runs gck_recv() on what w holds; returns its code, answers in *a. */
static int
run(struct fixture *f, struct wire *w, struct gck_recv_opts *o,
    struct answers *a, struct gck_recv_result *res)
{
	int	out, r;

	out = unit_memfd_ok(NULL, 0);
	assert_int_not_equal(out, -1);
	assert_int_equal(lseek(w->fd, 0, SEEK_SET), 0);
	o->infd = w->fd;
	o->outfd = out;
	if (o->id == NULL)
		o->id = ID;
	if (o->timeout_ms == 0)
		o->timeout_ms = 2000;
	r = gck_recv(f->u.ctx, o, res);
	answers_read(out, a);
	close(out);
	close(w->fd);
	return r;
}

static char *
slurp(const char *path, size_t *lenp)
{
	struct stat	 st;
	char		*buf;
	int		 fd;

	if ((fd = open(path, O_RDONLY)) == -1)
		return NULL;
	assert_int_equal(fstat(fd, &st), 0);
	assert_non_null(buf = malloc((size_t)st.st_size + 1));
	assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*lenp = (size_t)st.st_size;
	return buf;
}

static void
assert_file(const char *path, const char *data, size_t len)
{
	char	*got;
	size_t	 n;

	got = slurp(path, &n);
	assert_non_null(got);
	assert_int_equal(n, len);
	assert_memory_equal(got, data, len);
	free(got);
}

static int
exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static void
assert_error(const struct answers *a, const char *sub)
{
	const char	*e;

	assert_int_equal(a->n, 2);
	assert_int_equal(a->type[0], 'H');
	assert_int_equal(a->type[1], 'X');
	e = json_string_value(json_object_get(a->o[1], "error"));
	assert_non_null(e);
	if (strstr(e, sub) == NULL)
		fail_msg("'%s' does not say '%s'", e, sub);
}

/* A directory target takes the name; the answer says where and how much. */
static void
test_store(void **state)
{
	struct fixture		*f = *state;
	struct gck_recv_opts	 o;
	struct gck_recv_result	 res;
	struct answers		 a;
	struct wire		 w;
	char			 dir[PATHLEN], want[PATHLEN], part[PATHLEN];

	snprintf(dir, sizeof dir, "%s/", f->u.dir);
	wire_start(&w, 0);
	wire_data(&w, f->image, 0, f->ilen, 100000);
	wire_end(&w, f->ilen);
	memset(&o, 0, sizeof o);
	o.mode = GCK_RECV_STORE;
	o.path = dir;
	o.name = "job.gck";
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_OK);
	snprintf(want, sizeof want, "%s/job.gck", f->u.dir);
	snprintf(part, sizeof part, "%s/.job.gck.gpurecv-part", f->u.dir);
	assert_file(want, f->image, f->ilen);
	assert_false(exists(part));
	assert_int_equal(a.n, 2);
	assert_int_equal(a.type[0], 'H');
	assert_int_equal(json_integer_value(json_object_get(a.o[0], "proto")),
	    GCK_PROTO);
	assert_null(json_object_get(a.o[0], "partial"));
	assert_int_equal(a.type[1], 'S');
	assert_string_equal(json_string_value(json_object_get(a.o[1], "path")),
	    want);
	assert_int_equal(json_integer_value(json_object_get(a.o[1], "bytes")),
	    f->ilen);
	assert_string_equal(res.stored, want);
	assert_int_equal(res.bytes, f->ilen);
	free(res.stored);
	answers_free(&a);
}

/*
 * Cut short, the partial holds exactly what came; a resumed send is
 * offered its length and digest, and sends only the rest.
 */
static void
test_cut_and_resume(void **state)
{
	struct fixture		*f = *state;
	struct gck_recv_opts	 o;
	struct gck_recv_result	 res;
	struct answers		 a;
	struct wire		 w;
	XXH128_hash_t		 h;
	json_t			*p;
	char			 target[PATHLEN], part[PATHLEN], hex[33];
	size_t			 cut = 200000;

	snprintf(target, sizeof target, "%s/job.gck", f->u.dir);
	snprintf(part, sizeof part, "%s/.job.gck.gpurecv-part", f->u.dir);
	wire_start(&w, 0);
	wire_data(&w, f->image, 0, cut, 50000);
	memset(&o, 0, sizeof o);
	o.mode = GCK_RECV_STORE;
	o.path = target;
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_ETRUNC);
	assert_non_null(strstr(gck_error_string(f->u.ctx), "the sender went "
	    "away after 200000 bytes"));
	assert_non_null(strstr(gck_error_string(f->u.ctx), "kept for gpusend "
	    "--resume"));
	assert_false(exists(target));
	assert_file(part, f->image, cut);
	answers_free(&a);

	/* Resumed: told what is there, it takes the rest only. */
	wire_start(&w, cut);
	wire_data(&w, f->image, cut, f->ilen, 30000);
	wire_end(&w, f->ilen);
	memset(&o, 0, sizeof o);
	o.mode = GCK_RECV_STORE;
	o.path = target;
	o.resume = 1;
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_OK);
	assert_int_equal(a.type[0], 'H');
	p = json_object_get(a.o[0], "partial");
	assert_non_null(p);
	assert_int_equal(json_integer_value(json_object_get(p, "size")), cut);
	h = XXH3_128bits(f->image, cut);
	snprintf(hex, sizeof hex, "%016llx%016llx",
	    (unsigned long long)h.high64, (unsigned long long)h.low64);
	assert_string_equal(json_string_value(json_object_get(p, "xxh3")),
	    hex);
	assert_int_equal(a.type[1], 'S');
	assert_int_equal(res.offset, cut);
	assert_int_equal(res.bytes, f->ilen);
	assert_file(target, f->image, f->ilen);
	assert_false(exists(part));
	free(res.stored);
	answers_free(&a);
}

/* A sender that gives up says why; what came is kept for --resume. */
static void
test_abort(void **state)
{
	struct fixture		*f = *state;
	struct gck_recv_opts	 o;
	struct gck_recv_result	 res;
	struct answers		 a;
	struct wire		 w;
	char			 target[PATHLEN], part[PATHLEN];
	static const char	 why[] = "{\"error\":\"local: interrupted by SIGTERM\"}";

	snprintf(target, sizeof target, "%s/job.gck", f->u.dir);
	snprintf(part, sizeof part, "%s/.job.gck.gpurecv-part", f->u.dir);
	wire_start(&w, 0);
	wire_data(&w, f->image, 0, 100000, 40000);
	frame(&w, 'A', 0, why, sizeof why - 1);
	memset(&o, 0, sizeof o);
	o.mode = GCK_RECV_STORE;
	o.path = target;
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_EINTR);
	assert_non_null(strstr(gck_error_string(f->u.ctx), "the sender gave up "
	    "after 100000 bytes of the image: local: interrupted by SIGTERM; "
	    "what came is kept for gpusend --resume"));
	assert_false(exists(target));
	assert_file(part, f->image, 100000);
	answers_free(&a);
}

/* Without --resume, a partial left before is started over. */
static void
test_partial_restarted(void **state)
{
	struct fixture		*f = *state;
	struct gck_recv_opts	 o;
	struct gck_recv_result	 res;
	struct answers		 a;
	struct wire		 w;
	char			 target[PATHLEN], part[PATHLEN];
	int			 fd;

	snprintf(target, sizeof target, "%s/job.gck", f->u.dir);
	snprintf(part, sizeof part, "%s/.job.gck.gpurecv-part", f->u.dir);
	fd = open(part, O_WRONLY | O_CREAT, 0600);
	assert_int_equal(write(fd, "stale bytes", 11), 11);
	close(fd);
	wire_start(&w, 0);
	wire_data(&w, f->image, 0, f->ilen, 1 << 20);
	wire_end(&w, f->ilen);
	memset(&o, 0, sizeof o);
	o.mode = GCK_RECV_STORE;
	o.path = target;
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_OK);
	assert_null(json_object_get(a.o[0], "partial"));
	assert_file(target, f->image, f->ilen);
	free(res.stored);
	answers_free(&a);
}

/* Asked to resume beyond what it holds: refused, nothing written. */
static void
test_resume_beyond(void **state)
{
	struct fixture		*f = *state;
	struct gck_recv_opts	 o;
	struct gck_recv_result	 res;
	struct answers		 a;
	struct wire		 w;
	char			 target[PATHLEN];

	snprintf(target, sizeof target, "%s/job.gck", f->u.dir);
	wire_start(&w, 1000);
	wire_data(&w, f->image, 1000, f->ilen, 1 << 20);
	wire_end(&w, f->ilen);
	memset(&o, 0, sizeof o);
	o.mode = GCK_RECV_STORE;
	o.path = target;
	o.resume = 1;
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_EFORMAT);
	assert_error(&a, "asked to resume at byte 1000 of 0");
	assert_false(exists(target));
	answers_free(&a);
}

/* A damaged image is refused at the damage; neither file is left. */
static void
test_corrupt(void **state)
{
	struct fixture		*f = *state;
	struct gck_recv_opts	 o;
	struct gck_recv_result	 res;
	struct answers		 a;
	struct wire		 w;
	char			 target[PATHLEN], part[PATHLEN], *bad;

	snprintf(target, sizeof target, "%s/job.gck", f->u.dir);
	snprintf(part, sizeof part, "%s/.job.gck.gpurecv-part", f->u.dir);
	assert_non_null(bad = malloc(f->ilen));
	memcpy(bad, f->image, f->ilen);
	bad[f->ilen / 2] ^= 0x40;
	wire_start(&w, 0);
	wire_data(&w, bad, 0, f->ilen, 65536);
	wire_end(&w, f->ilen);
	memset(&o, 0, sizeof o);
	o.mode = GCK_RECV_STORE;
	o.path = target;
	assert_int_not_equal(run(f, &w, &o, &a, &res), GCK_OK);
	assert_int_equal(a.type[a.n - 1], 'X');
	assert_false(exists(target));
	assert_false(exists(part));
	free(bad);
	answers_free(&a);
}

/* Frames out of order, sizes that disagree, garbage: each refused. */
static void
test_bad_frames(void **state)
{
	struct fixture		*f = *state;
	struct gck_recv_opts	 o;
	struct gck_recv_result	 res;
	struct answers		 a;
	struct wire		 w;
	char			 target[PATHLEN], part[PATHLEN];
	unsigned char		 big[HDR];
	static const char	 shell[] = "sh: 1: gpurecv: not found\n";

	snprintf(target, sizeof target, "%s/job.gck", f->u.dir);
	snprintf(part, sizeof part, "%s/.job.gck.gpurecv-part", f->u.dir);
	memset(&o, 0, sizeof o);
	o.mode = GCK_RECV_STORE;
	o.path = target;

	/* Frame 1 first. */
	wire_start(&w, 0);
	w.seq = 1;
	wire_data(&w, f->image, 0, f->ilen, 1 << 20);
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_EFORMAT);
	assert_error(&a, "where data frame 0 was due");
	assert_false(exists(target));
	assert_false(exists(part));
	answers_free(&a);

	/* The end says more was sent than came. */
	wire_start(&w, 0);
	wire_data(&w, f->image, 0, f->ilen, 1 << 20);
	wire_end(&w, f->ilen + 1);
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_EFORMAT);
	assert_error(&a, "bytes of the image");
	assert_false(exists(target));
	assert_false(exists(part));
	answers_free(&a);

	/* A data frame larger than any sender makes. */
	wire_start(&w, 0);
	big[0] = 'G';
	big[1] = 'D';
	big[2] = big[3] = 0;
	be(big + 4, (2u << 20), 4);
	be(big + 8, 0, 8);
	assert_int_equal(write(w.fd, big, HDR), HDR);
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_EFORMAT);
	assert_error(&a, "not gpuckpt's protocol");
	answers_free(&a);

	/* Text where the start was due, quoted in the refusal. */
	w.fd = unit_memfd_ok(NULL, 0);
	assert_int_equal(write(w.fd, shell, sizeof shell - 1),
	    (ssize_t)sizeof shell - 1);
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_EFORMAT);
	assert_error(&a, "\"sh: 1: gpurecv: \"");
	assert_false(exists(part));
	answers_free(&a);
}

/* A directory with no name to give the image; a file being received. */
static void
test_refused_targets(void **state)
{
	struct fixture		*f = *state;
	struct gck_recv_opts	 o;
	struct gck_recv_result	 res;
	struct answers		 a;
	struct wire		 w;
	char			 target[PATHLEN], part[PATHLEN];
	int			 fd;

	wire_start(&w, 0);
	memset(&o, 0, sizeof o);
	o.mode = GCK_RECV_STORE;
	o.path = f->u.dir;
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_EINVAL);
	assert_non_null(strstr(gck_error_string(f->u.ctx), "is a directory: "
	    "give the image a file name"));
	answers_free(&a);

	snprintf(target, sizeof target, "%s/job.gck", f->u.dir);
	snprintf(part, sizeof part, "%s/.job.gck.gpurecv-part", f->u.dir);
	fd = open(part, O_RDWR | O_CREAT, 0600);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	wire_start(&w, 0);
	o.path = target;
	/* flock() locks are per open file: this one conflicts. */
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_EBUSY);
	assert_non_null(strstr(gck_error_string(f->u.ctx), "another gpurecv "
	    "is receiving"));
	assert_true(exists(part));
	close(fd);
	answers_free(&a);

	o.id = "not-an-id";
	wire_start(&w, 0);
	assert_int_equal(run(f, &w, &o, &a, &res), GCK_EINVAL);
	assert_non_null(strstr(gck_error_string(f->u.ctx), "invalid hand-over "
	    "id"));
	answers_free(&a);
}

/* What --outcome says of records; it asks again the same, so keeps them. */
static void
test_outcome(void **state)
{
	struct fixture		*f = *state;
	struct gck_recv_opts	 o;
	struct gck_recv_result	 res;
	struct answers		 a;
	struct wire		 w;
	char			 dir[PATHLEN], rec[PATHLEN + 64], out[64];
	static const struct {
		const char	*id, *content, *says;
		int		 kept;
	} cases[] = {
		{ "00000000000000000000000000000001", NULL, "unknown\n", 0 },
		{ "00000000000000000000000000000002", "running 4242\n",
		    "running 4242\n", 1 },
		{ "00000000000000000000000000000003", "failed\n", "failed\n",
		    1 },
		{ "00000000000000000000000000000004", "go 4242\n",
		    "unknown\n", 1 },
		{ "00000000000000000000000000000005", "ready\n", "failed\n",
		    1 },
	};
	size_t			 i;
	int			 fd, ofd;
	ssize_t			 n;

	/* A run directory of this test's own. */
	snprintf(dir, sizeof dir, "%s/run", f->u.dir);
	assert_int_equal(setenv("GCK_RUNDIR", dir, 1), 0);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(rec, sizeof rec, "%s/%s.rec", dir, cases[i].id);
		unlink(rec);
		if (cases[i].content != NULL) {
			fd = open(rec, O_WRONLY | O_CREAT | O_EXCL, 0600);
			assert_int_not_equal(fd, -1);
			assert_int_equal(write(fd, cases[i].content,
			    strlen(cases[i].content)),
			    (ssize_t)strlen(cases[i].content));
			close(fd);
		}
		memset(&o, 0, sizeof o);
		o.mode = GCK_RECV_OUTCOME;
		o.id = cases[i].id;
		o.timeout_ms = 500;
		o.infd = -1;
		ofd = unit_memfd_ok(NULL, 0);
		o.outfd = ofd;
		assert_int_equal(gck_recv(f->u.ctx, &o, &res), GCK_OK);
		n = pread(ofd, out, sizeof out - 1, 0);
		assert_true(n > 0);
		out[n] = '\0';
		assert_string_equal(out, cases[i].says);
		assert_int_equal(exists(rec), cases[i].kept);
		unlink(rec);
		close(ofd);
		if (i == 0) {
			struct stat	st;

			/* made on first use, closed to others */
			assert_int_equal(stat(dir, &st), 0);
			assert_int_equal(st.st_mode & 0777, 0700);
		}
	}
	unsetenv("GCK_RUNDIR");
	(void)w;
	(void)a;
}

/* The START of a live migration's stop image: to be taken in whole. */
#define WHOLE_START	"{\"offset\":0,\"whole\":true}"

/*
 * The cache directory of a restore, into cache, and a run directory of
 * the test's own.
 */
static void
whole_dirs(struct fixture *f, char *cache, size_t size)
{
	char	run_dir[PATHLEN];

	snprintf(cache, size, "%s/cache", f->u.dir);
	snprintf(run_dir, sizeof run_dir, "%s/run", f->u.dir);
	assert_int_equal(setenv("GCK_RUNDIR", run_dir, 1), 0);
}

/* How many images the cache directory dir keeps. */
static int
cached_images(const char *dir)
{
	struct dirent	*de;
	DIR		*d;
	size_t		 l;
	int		 n = 0;

	assert_non_null(d = opendir(dir));
	while ((de = readdir(d)) != NULL)
		if ((l = strlen(de->d_name)) > 4 &&
		    strcmp(de->d_name + l - 4, ".gck") == 0)
			n++;
	closedir(d);
	return n;
}

/*
 * A stop image to be taken in whole before it is restored, cut short:
 * nothing is restored, the cache keeps nothing, the sender hears why.
 */
static void
test_whole_cut(void **state)
{
	struct fixture		*f = *state;
	struct gck_recv_opts	 o;
	struct gck_recv_result	 res;
	struct answers		 a;
	struct wire		 w;
	char			 cache[PATHLEN];

	whole_dirs(f, cache, sizeof cache);
	wire_begin(&w, unit_memfd_ok(NULL, 0), WHOLE_START);
	wire_data(&w, f->image, 0, 100000, 40000);
	memset(&o, 0, sizeof o);
	o.mode = GCK_RECV_RESTORE;
	o.cache = cache;
	assert_int_not_equal(run(f, &w, &o, &a, &res), GCK_OK);
	assert_error(&a, "the sender went away after 100000 bytes of the "
	    "image");
	assert_int_equal(res.pid, -1);
	assert_int_equal(cached_images(cache), 0);
	answers_free(&a);
	unsetenv("GCK_RUNDIR");
}

struct later {
	volatile sig_atomic_t	*flag;
	int			 sig;
};

static void *
interrupt_later(void *arg)
{
	struct later		*l = arg;
	const struct timespec	 ts = { 0, 300 * 1000 * 1000 };

	nanosleep(&ts, NULL);
	*l->flag = l->sig;
	return NULL;
}

/*
 * A signal while the stop image is taken in whole, from a sender that
 * has gone quiet: the wait ends, with the signal's word.
 */
static void
test_whole_interrupted(void **state)
{
	struct fixture			*f = *state;
	static volatile sig_atomic_t	 flag;
	struct gck_recv_opts		 o;
	struct gck_recv_result		 res;
	struct later			 l = { &flag, SIGTERM };
	struct answers			 a;
	struct wire			 w;
	pthread_t			 t;
	char				 cache[PATHLEN];
	int				 p[2], out;

	whole_dirs(f, cache, sizeof cache);
	assert_int_equal(pipe(p), 0);
	wire_begin(&w, p[1], WHOLE_START);
	wire_data(&w, f->image, 0, 20000, 10000);
	flag = 0;
	gck_set_interrupt(f->u.ctx, &flag);
	assert_int_equal(pthread_create(&t, NULL, interrupt_later, &l), 0);
	/* Should the wait not end, the test ends here. */
	alarm(30);
	memset(&o, 0, sizeof o);
	o.mode = GCK_RECV_RESTORE;
	o.cache = cache;
	o.id = ID;
	o.infd = p[0];
	o.outfd = out = unit_memfd_ok(NULL, 0);
	o.timeout_ms = 60000;
	assert_int_equal(gck_recv(f->u.ctx, &o, &res), GCK_EINTR);
	alarm(0);
	pthread_join(t, NULL);
	gck_set_interrupt(f->u.ctx, NULL);
	assert_non_null(strstr(gck_error_string(f->u.ctx),
	    "interrupted by SIGTERM"));
	assert_int_equal(cached_images(cache), 0);
	answers_read(out, &a);
	assert_true(a.n >= 1);
	assert_int_equal(a.type[0], 'H');
	answers_free(&a);
	close(out);
	close(p[0]);
	close(p[1]);
	unsetenv("GCK_RUNDIR");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cut_and_resume, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_abort, setup, teardown),
		cmocka_unit_test_setup_teardown(test_partial_restarted, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_resume_beyond, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_frames, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_refused_targets, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_outcome, setup, teardown),
		cmocka_unit_test_setup_teardown(test_whole_cut, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_whole_interrupted, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
