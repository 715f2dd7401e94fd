/*
 * t_needs: what gpuinspect says the processes of an image have open, and
 * what --check finds missing, for images made here of CRIU records
 * packed by hand: a deleted file that travels in the image, an abstract
 * socket whose peer is outside the tree, a listening socket whose
 * directory is gone, files there, gone and resized; and an image made
 * before the environment was recorded, or with no CRIU files at all.
 * Then TCP and UDP sockets: listed, with records that lie; and checked
 * against this host, by --check and by the check gpurestore makes before
 * criu restores (gck_needs_restore_check()), on ports that a process of
 * the test holds, on an address this host lacks, in a network namespace
 * of the tree's own, and on each of the lies.
 */
#include "config.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <netinet/in.h>

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

#include <jansson.h>

#include "private.h"
#include "image/image.h"
#include "ops/needs.h"
#include "criu/criu-images.pb-c.h"
#include "unit.h"

#define COMMON_MAGIC		0x54564319u
#define INVENTORY_MAGIC		0x58313116u
#define PSTREE_MAGIC		0x50273030u
#define FDINFO_MAGIC		0x56213732u
#define IDS_MAGIC		0x54432030u
#define FS_MAGIC		0x51403912u
#define FILES_MAGIC		0x56303138u
#define REMAP_FPATH_MAGIC	0x59133954u

#define PID		1		/* in use here: a note */
#define MAXFILE		8
#define NETNS		5		/* CRIU's id of criu's netns */
#define NOADDR		"192.0.2.10"	/* TEST-NET-1: not on this host */
#define HUGE_WORDS	200000

/* How an inet socket of the tests is in files.img. */
enum isk_entry {
	ISK_RECORD,			/* a file_entry with the record */
	ISK_NORECORD,			/* one of type inet without it */
	ISK_NONE,			/* none: fdinfo names a missing id */
	ISK_TWICE,			/* the record, then one on port 70000 */
	ISK_REGTYPE,			/* one of type file with the record */
	ISK_OTHERID			/* the record of another id */
};

/* An inet socket of the tests, on descriptor fd of process PID. */
struct isk {
	uint32_t	 fd;
	uint32_t	 family, type, proto, state;
	const char	*src;		/* an address of family, or NULL */
	uint32_t	 sport;
	const char	*dst;
	uint32_t	 dport;
	size_t		 nsrc;		/* its words: 0 as family has them */
	enum isk_entry	 entry;
	uint32_t	 ns_id;		/* 0: not recorded */
};

struct buf {
	char		*p;
	size_t		 len, cap;
};

struct blob {
	const char	*name;
	struct buf	 b;
};

struct files {
	struct blob	 f[MAXFILE];
	size_t		 n;
};

static void	 buf_put(struct buf *, const void *, size_t);
static void	 buf_record(struct buf *, const ProtobufCMessage *);
static struct buf *img_new(struct files *, const char *, uint32_t);
static void	 add_fd(struct buf *, uint32_t, uint32_t, uint32_t);
static void	 add_reg(struct buf *, uint32_t, const char *, uint64_t,
		    uint32_t, int);
static void	 add_usk(struct buf *, uint32_t, uint32_t, const char *,
		    size_t, uint32_t, uint32_t, uint32_t);
static void	 criu_files(const struct unit *, struct files *);
static void	 add_isk(struct buf *, uint32_t, const struct isk *);
static void	 inet_files(struct files *, const struct isk *, size_t);
static int	 write_dir(const struct unit *, const struct files *);
static int	 restore_check(struct unit *, const struct isk *, size_t,
		    int);
static int	 free_port(int);
static int	 lacks(const char *);
static pid_t	 hold(int, int *, int *);
static int	 time_wait(void);
static void	 comm_of(pid_t, char *, size_t);
static int	 write_image(struct gck_ctx *, const struct files *);
static void	 files_free(struct files *);
static json_t	*fd_of(json_t *, int);
static json_t	*show(struct gck_ctx *, int, unsigned int);
static void	 test_descriptors(void **);
static void	 test_check(void **);
static void	 test_manifest_only(void **);
static void	 test_inet_descriptors(void **);
static void	 test_inet_restore_check(void **);
static void	 test_inet_lies(void **);
static void	 test_inet_check(void **);
static void	 test_fds_lacking(void **);

static void
buf_put(struct buf *b, const void *p, size_t len)
{
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2 + 64;
		assert_non_null(b->p = realloc(b->p, b->cap));
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
}

/* A CRIU image record: its length, then the packed message. */
static void
buf_record(struct buf *b, const ProtobufCMessage *msg)
{
	uint8_t		*p;
	uint32_t	 len = (uint32_t)protobuf_c_message_get_packed_size(msg);

	assert_non_null(p = malloc(len + 1));
	assert_int_equal(protobuf_c_message_pack(msg, p), len);
	buf_put(b, &len, sizeof len);
	buf_put(b, p, len);
	free(p);
}

/* A new CRIU image name of magic (inventory.img has no common magic). */
static struct buf *
img_new(struct files *fs, const char *name, uint32_t magic)
{
	struct blob	*f;
	uint32_t	 m = COMMON_MAGIC;

	assert_true(fs->n < MAXFILE);
	f = &fs->f[fs->n++];
	memset(f, 0, sizeof *f);
	f->name = name;
	if (magic != INVENTORY_MAGIC)
		buf_put(&f->b, &m, sizeof m);
	buf_put(&f->b, &magic, sizeof magic);
	return &f->b;
}

static void
add_fd(struct buf *b, uint32_t fd, uint32_t type, uint32_t id)
{
	FdinfoEntry	e = FDINFO_ENTRY__INIT;

	e.has_id = e.has_fd = e.has_type = e.has_flags = 1;
	e.id = id;
	e.fd = fd;
	e.type = type;
	buf_record(b, &e.base);
}

/* A regular file of files.img; size recorded where with_size. */
static void
add_reg(struct buf *b, uint32_t id, const char *name, uint64_t size,
    uint32_t mode, int with_size)
{
	FileEntry	fe = FILE_ENTRY__INIT;
	RegFileEntry	re = REG_FILE_ENTRY__INIT;

	fe.has_type = fe.has_id = 1;
	fe.type = 1;
	fe.id = id;
	fe.reg = &re;
	re.has_id = re.has_flags = re.has_pos = re.has_mode = 1;
	re.id = id;
	re.flags = O_RDONLY;
	re.pos = 3;
	re.name = (char *)name;
	re.mode = mode;
	re.has_size = with_size;
	re.size = size;
	buf_record(b, &fe.base);
}

/* A unix socket of files.img: name (len bytes), or none. */
static void
add_usk(struct buf *b, uint32_t id, uint32_t ino, const char *name,
    size_t len, uint32_t type, uint32_t state, uint32_t peer)
{
	FileEntry	fe = FILE_ENTRY__INIT;
	UnixSkEntry	us = UNIX_SK_ENTRY__INIT;

	fe.has_type = fe.has_id = 1;
	fe.type = 5;
	fe.id = id;
	fe.usk = &us;
	us.has_id = us.has_ino = us.has_type = us.has_state = 1;
	us.has_peer = 1;
	us.id = id;
	us.ino = ino;
	us.type = type;
	us.state = state;
	us.peer = peer;
	us.has_name = name != NULL;
	us.name.data = (uint8_t *)name;
	us.name.len = len;
	buf_record(b, &fe.base);
}

/*
 * Process PID: fd 3 on a deleted file (a ghost), fd 4 on u's "here"
 * (5 bytes, as the image says), fd 5 on u's "gone" (missing), fd 6 on
 * u's "resized" (7 bytes in the image, 9 here), fd 7 an abstract
 * datagram socket whose peer is outside the tree, fd 8 a socket
 * listening on u's "nodir/sock"; u's directory as working directory,
 * "/" as root; a mount namespace of its own where own_mnt.
 */
static void
criu_files(const struct unit *u, struct files *fs)
{
	static char		 here[PATH_MAX], gone[PATH_MAX], rs[PATH_MAX];
	static char		 sock[PATH_MAX], dir[PATH_MAX];
	PstreeEntry		 pe = PSTREE_ENTRY__INIT;
	TaskKobjIdsEntry	 ids = TASK_KOBJ_IDS_ENTRY__INIT;
	TaskKobjIdsEntry	 root = TASK_KOBJ_IDS_ENTRY__INIT;
	InventoryEntry		 ie = INVENTORY_ENTRY__INIT;
	FsEntry			 fse = FS_ENTRY__INIT;
	RemapFilePathEntry	 rm = REMAP_FILE_PATH_ENTRY__INIT;
	struct buf		*b;

	snprintf(here, sizeof here, "%s", unit_path(u, "here"));
	snprintf(gone, sizeof gone, "%s", unit_path(u, "gone"));
	snprintf(rs, sizeof rs, "%s", unit_path(u, "resized"));
	snprintf(sock, sizeof sock, "%s", unit_path(u, "nodir/sock"));
	snprintf(dir, sizeof dir, "%s", u->dir);
	memset(fs, 0, sizeof *fs);
	root.has_mnt_ns_id = ids.has_mnt_ns_id = ids.has_files_id = 1;
	root.mnt_ns_id = ids.mnt_ns_id = 2;
	ids.files_id = 9;
	ie.root_ids = &root;
	buf_record(img_new(fs, "inventory.img", INVENTORY_MAGIC), &ie.base);
	b = img_new(fs, "files.img", FILES_MAGIC);
	add_reg(b, 10, "/gck-t-needs/deleted", 11, S_IFREG | 0600, 1);
	add_reg(b, 11, here, 5, S_IFREG | 0600, 1);
	add_reg(b, 12, gone, 5, S_IFREG | 0600, 1);
	add_reg(b, 13, rs, 7, S_IFREG | 0600, 1);
	add_reg(b, 14, dir, 0, S_IFDIR | 0700, 0);
	add_reg(b, 15, "/", 0, S_IFDIR | 0755, 0);
	add_usk(b, 16, 1000, "\0gck-t-needs", 12, SOCK_DGRAM, 7, 999);
	add_usk(b, 17, 1001, sock, strlen(sock), SOCK_STREAM, 10, 0);
	rm.has_orig_id = rm.has_remap_id = rm.has_remap_type = 1;
	rm.orig_id = 10;
	rm.remap_id = 20;
	rm.remap_type = 1;
	buf_record(img_new(fs, "remap-fpath.img", REMAP_FPATH_MAGIC),
	    &rm.base);
	b = img_new(fs, "fdinfo-9.img", FDINFO_MAGIC);
	add_fd(b, 3, 1, 10);
	add_fd(b, 4, 1, 11);
	add_fd(b, 5, 1, 12);
	add_fd(b, 6, 1, 13);
	add_fd(b, 7, 5, 16);
	add_fd(b, 8, 5, 17);
	buf_record(img_new(fs, "ids-1.img", IDS_MAGIC), &ids.base);
	fse.has_cwd_id = fse.has_root_id = 1;
	fse.cwd_id = 14;
	fse.root_id = 15;
	buf_record(img_new(fs, "fs-1.img", FS_MAGIC), &fse.base);
	pe.has_pid = 1;
	pe.pid = PID;
	buf_record(img_new(fs, "pstree.img", PSTREE_MAGIC), &pe.base);
}

/* An image of the CRIU files fs, its manifest without "environ". */
static int
write_image(struct gck_ctx *ctx, const struct files *fs)
{
	struct gck_writer	*w = NULL;
	json_t			*m, *fl;
	char			*text, name[64];
	size_t			 i;
	int			 fd;

	assert_non_null(fl = json_array());
	for (i = 0; i < fs->n; i++)
		json_array_append_new(fl, json_pack("{s:s, s:I, s:b}", "name",
		    fs->f[i].name, "size", (json_int_t)fs->f[i].b.len, "memory",
		    0));
	assert_non_null(m = json_pack("{s:i, s:i, s:[{s:i, s:i, s:s, s:[s]}],"
	    " s:o}", "format", 1, "root_pid", PID, "processes", "pid", PID,
	    "ppid", 0, "comm", "init", "cmdline", "init", "files", fl));
	assert_non_null(text = json_dumps(m, 0));
	json_decref(m);
	assert_int_not_equal(fd = memfd_create("t_needs", MFD_CLOEXEC), -1);
	assert_int_equal(gck_writer_new2(ctx, fd, 0, 0, 1, 0, &w), GCK_OK);
	assert_int_equal(gck_writer_add(w, "gpuckpt.json", text,
	    strlen(text)), GCK_OK);
	for (i = 0; i < fs->n; i++) {
		snprintf(name, sizeof name, "criu/%s", fs->f[i].name);
		if (gck_writer_add(w, name, fs->f[i].b.p, fs->f[i].b.len) !=
		    GCK_OK)
			fail_msg("cannot add '%s': %s", name,
			    gck_error_string(ctx));
	}
	assert_int_equal(gck_writer_finish(w), GCK_OK);
	gck_writer_free(w);
	free(text);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static void
files_free(struct files *fs)
{
	size_t	i;

	for (i = 0; i < fs->n; i++)
		free(fs->f[i].b.p);
}

/* The descriptor fd of the first process of the document. */
static json_t *
fd_of(json_t *doc, int fd)
{
	json_t	*p, *f;
	size_t	 i;

	p = json_array_get(json_object_get(json_object_get(doc,
	    "descriptors"), "processes"), 0);
	json_array_foreach(json_object_get(p, "fds"), i, f)
		if (json_integer_value(json_object_get(f, "fd")) == fd)
			return f;
	fail_msg("no fd %d", fd);
	return NULL;
}

static json_t *
show(struct gck_ctx *ctx, int fd, unsigned int flags)
{
	json_t	*doc;
	char	*text = NULL;

	if (gck_inspect_show_opts(ctx, fd, flags, &text) != GCK_OK)
		fail_msg("show: %s", gck_error_string(ctx));
	assert_non_null(doc = json_loads(text, 0, NULL));
	free(text);
	return doc;
}

static void
test_descriptors(void **state)
{
	struct unit	*u = *state;
	struct files	 fs;
	json_t		*doc, *f, *d, *p;
	int		 fd;

	criu_files(u, &fs);
	fd = write_image(u->ctx, &fs);
	files_free(&fs);
	doc = show(u->ctx, fd, GCK_SHOW_ENV);
	close(fd);
	/* made before the environment was recorded */
	p = json_array_get(json_object_get(doc, "processes"), 0);
	assert_true(json_is_null(json_object_get(p, "environment")));
	d = json_object_get(doc, "descriptors");
	p = json_array_get(json_object_get(d, "processes"), 0);
	assert_string_equal(json_string_value(json_object_get(p, "cwd")),
	    u->dir);
	assert_string_equal(json_string_value(json_object_get(p, "root")),
	    "/");
	f = fd_of(doc, 3);
	assert_true(json_is_true(json_object_get(f, "ghost")));
	assert_int_equal(json_integer_value(json_object_get(f, "size")), 11);
	assert_int_equal(json_integer_value(json_object_get(f, "pos")), 3);
	assert_string_equal(json_string_value(json_object_get(f, "mode")),
	    "r");
	f = fd_of(doc, 7);
	assert_string_equal(json_string_value(json_object_get(f, "address")),
	    "@gck-t-needs");
	assert_true(json_is_true(json_object_get(f, "abstract")));
	assert_string_equal(json_string_value(json_object_get(f,
	    "socket_type")), "dgram");
	assert_string_equal(json_string_value(json_object_get(f, "state")),
	    "unconnected");
	assert_string_equal(json_string_value(json_object_get(f, "peer")),
	    "external");
	f = fd_of(doc, 8);
	assert_string_equal(json_string_value(json_object_get(f, "state")),
	    "listening");
	assert_true(json_is_null(json_object_get(f, "peer")));
	assert_true(json_is_false(json_object_get(json_object_get(d,
	    "mount_namespace"), "own")));
	f = json_object_get(d, "totals");
	assert_int_equal(json_integer_value(json_object_get(f, "files")), 4);
	assert_int_equal(json_integer_value(json_object_get(f, "sockets")), 2);
	assert_int_equal(json_integer_value(json_object_get(f, "pipes")), 0);
	json_decref(doc);
}

static void
test_check(void **state)
{
	struct unit	*u = *state;
	struct files	 fs;
	json_t		*doc, *fl, *want;
	char		*text = NULL, msg[3][PATH_MAX + 200];
	int		 fd, fail = 0, wfd;

	assert_int_not_equal(wfd = open(unit_path(u, "here"), O_WRONLY |
	    O_CREAT, 0600), -1);
	assert_int_equal(write(wfd, "12345", 5), 5);
	close(wfd);
	assert_int_not_equal(wfd = open(unit_path(u, "resized"), O_WRONLY |
	    O_CREAT, 0600), -1);
	assert_int_equal(write(wfd, "123456789", 9), 9);
	close(wfd);
	criu_files(u, &fs);
	fd = write_image(u->ctx, &fs);
	files_free(&fs);
	if (gck_inspect_check(u->ctx, fd, &text, &fail) != GCK_OK)
		fail_msg("check: %s", gck_error_string(u->ctx));
	close(fd);
	assert_int_equal(fail, 1);
	assert_non_null(doc = json_loads(text, 0, NULL));
	free(text);
	fl = json_object_get(doc, "findings");
	snprintf(msg[0], sizeof msg[0], "file '%s' is missing here: No such "
	    "file or directory", unit_path(u, "gone"));
	snprintf(msg[1], sizeof msg[1], "file '%s' is 9 bytes here, 7 in the "
	    "image: criu restores only a file of the size it had",
	    unit_path(u, "resized"));
	snprintf(msg[2], sizeof msg[2], "unix socket '%s' of process %d (fd "
	    "8, listening) needs directory '%s', which is missing here",
	    unit_path(u, "nodir/sock"), PID, unit_path(u, "nodir"));
	/* not the deleted file, which travels in the image */
	assert_non_null(want = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, "
	    "{s:s, s:s, s:s}]", "severity", "fail", "what", "file", "message",
	    msg[0], "severity", "fail", "what", "file", "message", msg[1],
	    "severity", "fail", "what", "socket", "message", msg[2]));
	/* (pid 1 is in use here: a note follows) */
	assert_true(json_array_size(fl) == 4);
	assert_string_equal(json_string_value(json_object_get(
	    json_array_get(fl, 3), "severity")), "note");
	json_array_remove(fl, 3);
	if (!json_equal(fl, want)) {
		char	*s = json_dumps(fl, JSON_INDENT(2));

		fail_msg("findings: %s", s);
	}
	assert_true(json_is_false(json_object_get(doc, "ok")));
	json_decref(want);
	json_decref(doc);
}

/* An image with no CRIU files: nothing to tell, nothing to check. */
static void
test_manifest_only(void **state)
{
	struct unit	*u = *state;
	struct files	 fs;
	json_t		*doc;
	char		*text = NULL;
	int		 fd, fail = 1;

	memset(&fs, 0, sizeof fs);
	fd = write_image(u->ctx, &fs);
	doc = show(u->ctx, fd, 0);
	assert_true(json_is_null(json_object_get(doc, "descriptors")));
	assert_null(json_object_get(json_array_get(json_object_get(doc,
	    "processes"), 0), "environment"));
	json_decref(doc);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(gck_inspect_check(u->ctx, fd, &text, &fail), GCK_OK);
	close(fd);
	assert_int_equal(fail, 0);
	assert_non_null(strstr(text, "the image does not list its processes' "
	    "files: they are not checked"));
	free(text);
}

/*
 * Inet socket k of files.img, its id id: src and dst packed as CRIU packs
 * them (the address's bytes in 32-bit words), k->nsrc words of src.
 */
static void
add_isk(struct buf *b, uint32_t id, const struct isk *k)
{
	FileEntry	 fe = FILE_ENTRY__INIT;
	InetSkEntry	 ie = INET_SK_ENTRY__INIT;
	uint32_t	*src, dst[4];
	size_t		 n;

	n = k->nsrc != 0 ? k->nsrc : k->family == AF_INET6 ? 4 : 1;
	assert_non_null(src = calloc(n < 4 ? 4 : n, sizeof *src));
	memset(dst, 0, sizeof dst);
	if (k->src != NULL)
		assert_int_equal(inet_pton(strchr(k->src, ':') != NULL ?
		    AF_INET6 : AF_INET, k->src, src), 1);
	if (k->dst != NULL)
		assert_int_equal(inet_pton(strchr(k->dst, ':') != NULL ?
		    AF_INET6 : AF_INET, k->dst, dst), 1);
	fe.has_type = fe.has_id = 1;
	fe.type = 4;
	fe.id = id;
	ie.has_id = ie.has_ino = ie.has_family = ie.has_type = 1;
	ie.has_proto = ie.has_state = ie.has_src_port = ie.has_dst_port = 1;
	ie.id = id;
	ie.ino = 5000 + id;
	ie.family = k->family;
	ie.type = k->type;
	ie.proto = k->proto;
	ie.state = k->state;
	ie.src_port = k->sport;
	ie.dst_port = k->dport;
	ie.n_src_addr = n;
	ie.src_addr = src;
	ie.n_dst_addr = k->family == AF_INET6 ? 4 : 1;
	ie.dst_addr = dst;
	ie.has_ns_id = k->ns_id != 0;
	ie.ns_id = k->ns_id;
	if (k->entry != ISK_NORECORD)
		fe.isk = &ie;
	if (k->entry == ISK_REGTYPE)
		fe.type = 1;
	if (k->entry == ISK_OTHERID)
		ie.id = id + 1000;
	buf_record(b, &fe.base);
	/* the one criu restore would take, as it takes the last */
	if (k->entry == ISK_TWICE) {
		ie.src_port = 70000;
		buf_record(b, &fe.base);
	}
	free(src);
}

/*
 * The CRIU files of process PID, in criu's network namespace, with the
 * inet sockets k[0..n-1] open, each on its fd.
 */
static void
inet_files(struct files *fs, const struct isk *k, size_t n)
{
	PstreeEntry		 pe = PSTREE_ENTRY__INIT;
	TaskKobjIdsEntry	 ids = TASK_KOBJ_IDS_ENTRY__INIT;
	TaskKobjIdsEntry	 root = TASK_KOBJ_IDS_ENTRY__INIT;
	InventoryEntry		 ie = INVENTORY_ENTRY__INIT;
	struct buf		*b;
	size_t			 i;

	memset(fs, 0, sizeof *fs);
	root.has_mnt_ns_id = ids.has_mnt_ns_id = ids.has_files_id = 1;
	root.has_net_ns_id = ids.has_net_ns_id = 1;
	root.mnt_ns_id = ids.mnt_ns_id = 2;
	root.net_ns_id = ids.net_ns_id = NETNS;
	ids.files_id = 9;
	ie.root_ids = &root;
	buf_record(img_new(fs, "inventory.img", INVENTORY_MAGIC), &ie.base);
	b = img_new(fs, "files.img", FILES_MAGIC);
	for (i = 0; i < n; i++)
		if (k[i].entry != ISK_NONE)
			add_isk(b, 100 + (uint32_t)i, &k[i]);
	b = img_new(fs, "fdinfo-9.img", FDINFO_MAGIC);
	for (i = 0; i < n; i++)
		add_fd(b, k[i].fd, 4, 100 + (uint32_t)i);
	buf_record(img_new(fs, "ids-1.img", IDS_MAGIC), &ids.base);
	pe.has_pid = 1;
	pe.pid = PID;
	buf_record(img_new(fs, "pstree.img", PSTREE_MAGIC), &pe.base);
}

/* The CRIU files fs in u's directory "img", as gpurestore has them. */
static int
write_dir(const struct unit *u, const struct files *fs)
{
	char	path[PATH_MAX];
	size_t	i;
	int	dfd, fd;

	snprintf(path, sizeof path, "%s", unit_path(u, "img"));
	unit_rmtree(path);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_not_equal(dfd = open(path, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC), -1);
	for (i = 0; i < fs->n; i++) {
		assert_int_not_equal(fd = openat(dfd, fs->f[i].name, O_WRONLY |
		    O_CREAT | O_EXCL | O_CLOEXEC, 0600), -1);
		assert_int_equal(write(fd, fs->f[i].b.p, fs->f[i].b.len),
		    (ssize_t)fs->f[i].b.len);
		close(fd);
	}
	return dfd;
}

/* gck_needs_restore_check() of an image of the n sockets of k. */
static int
restore_check(struct unit *u, const struct isk *k, size_t n, int tcp_close)
{
	struct files	fs;
	int		dfd, r;

	inet_files(&fs, k, n);
	dfd = write_dir(u, &fs);
	files_free(&fs);
	r = gck_needs_restore_check(u->ctx, dfd, NULL, NULL, tcp_close);
	close(dfd);
	return r;
}

/* A port of 127.0.0.1 free here for a socket of type, for a moment. */
static int
free_port(int type)
{
	struct sockaddr_in	sa;
	socklen_t		len = sizeof sa;
	int			fd;

	assert_int_not_equal(fd = socket(AF_INET, type, 0), -1);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* Whether this host lacks IPv4 address a: a bind() to it says so. */
static int
lacks(const char *a)
{
	struct sockaddr_in	sa;
	int			fd, r;

	assert_int_not_equal(fd = socket(AF_INET, SOCK_STREAM, 0), -1);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, a, &sa.sin_addr), 1);
	r = bind(fd, (struct sockaddr *)&sa, sizeof sa) == -1 &&
	    errno == EADDRNOTAVAIL;
	close(fd);
	return r;
}

/*
 * A child that holds a TCP socket listening on 127.0.0.1:*tcpp and, with
 * udp, a UDP socket bound to 127.0.0.1:*udpp (neither with SO_REUSEADDR)
 * until it is killed (or a minute has passed); this process keeps
 * neither.
 */
static pid_t
hold(int udp, int *tcpp, int *udpp)
{
	struct sockaddr_in	sa;
	socklen_t		len;
	pid_t			pid;
	int			t, d = -1, i;

	for (i = 0; i < 1 + udp; i++) {
		assert_int_not_equal(i == 0 ? (t = socket(AF_INET,
		    SOCK_STREAM, 0)) : (d = socket(AF_INET, SOCK_DGRAM, 0)),
		    -1);
		memset(&sa, 0, sizeof sa);
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_int_equal(bind(i == 0 ? t : d, (struct sockaddr *)&sa,
		    sizeof sa), 0);
		len = sizeof sa;
		assert_int_equal(getsockname(i == 0 ? t : d,
		    (struct sockaddr *)&sa, &len), 0);
		*(i == 0 ? tcpp : udpp) = ntohs(sa.sin_port);
	}
	assert_int_equal(listen(t, 1), 0);
	assert_int_not_equal(pid = fork(), -1);
	if (pid == 0) {
		/* gone in a minute, should the test fail without killing it */
		for (i = 0; i < 3; i++)
			(void)dup2(open("/dev/null", O_RDWR), i);
		alarm(60);
		for (;;)
			pause();
	}
	close(t);
	if (d != -1)
		close(d);
	return pid;
}

/*
 * A port of 127.0.0.1 that a closed connection holds, in TIME_WAIT: the
 * end that accept() gave, of a socket listening without SO_REUSEADDR,
 * closed first.
 */
static int
time_wait(void)
{
	struct sockaddr_in	sa;
	socklen_t		len = sizeof sa;
	int			l, c, s;

	assert_int_not_equal(l = socket(AF_INET, SOCK_STREAM, 0), -1);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &len), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_not_equal(c = socket(AF_INET, SOCK_STREAM, 0), -1);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_not_equal(s = accept(l, NULL, NULL), -1);
	close(s);
	usleep(50000);
	close(c);
	close(l);
	usleep(50000);
	return ntohs(sa.sin_port);
}

/* The command name of process pid, as /proc has it. */
static void
comm_of(pid_t pid, char *buf, size_t len)
{
	char	path[64];
	FILE	*fp;

	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	assert_non_null(fp = fopen(path, "r"));
	assert_non_null(fgets(buf, (int)len, fp));
	fclose(fp);
	buf[strcspn(buf, "\n")] = '\0';
}

/* The descriptor fd of the first process of doc, its members' strings. */
#define assert_members(doc, fd, fam, ty, pr, st, ad, pa, pe) do {	\
	json_t		*f_ = fd_of((doc), (fd));			\
	const char	*w_[7] = { (fam), (ty), (pr), (st), (ad), (pa),	\
			    (pe) };					\
	const char	*k_[7] = { "family", "socket_type", "protocol",	\
			    "state", "address", "peer_address", "peer" }; \
	int		 i_;						\
									\
	assert_string_equal(json_string_value(json_object_get(f_,	\
	    "type")), "inet");						\
	for (i_ = 0; i_ < 7; i_++) {					\
		if (w_[i_] == NULL) {					\
			if (!json_is_null(json_object_get(f_, k_[i_])))	\
				fail_msg("fd %d: %s is not null", (fd),	\
				    k_[i_]);				\
		} else if (json_string_value(json_object_get(f_,	\
		    k_[i_])) == NULL || strcmp(json_string_value(	\
		    json_object_get(f_, k_[i_])), w_[i_]) != 0)		\
			fail_msg("fd %d: %s is %s, not %s", (fd),	\
			    k_[i_], json_string_value(json_object_get(f_, \
			    k_[i_])), w_[i_]);				\
	}								\
} while (0)

/*
 * Sockets as gpuinspect lists them: TCP listening, a connection both
 * ends of which the process has, over IPv4 and between an IPv6 socket
 * (an IPv4 address mapped) and an IPv4 one, one to outside the tree,
 * UDP unbound and connected, IPv6 listening; then records that lie,
 * shown as unknown: an unknown family, type, protocol or state, an
 * address of the wrong length for its family or of a huge number of
 * words, a port above 65535, a file_entry of type inet without its
 * record, a descriptor that names a socket files.img lacks, a file_entry
 * of type file carrying a socket's record, a record whose id is not its
 * file's (neither of which criu restore takes for the socket).
 */
static void
test_inet_descriptors(void **state)
{
	static const struct isk	k[] = {
		{ 3, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40001, "0.0.0.0", 0, 0, ISK_RECORD, 0 },
		{ 4, AF_INET, SOCK_STREAM, IPPROTO_TCP, 1, "127.0.0.1",
		    40002, "127.0.0.1", 40001, 0, ISK_RECORD, 0 },
		{ 5, AF_INET, SOCK_STREAM, IPPROTO_TCP, 1, "127.0.0.1",
		    40001, "127.0.0.1", 40002, 0, ISK_RECORD, 0 },
		{ 6, AF_INET, SOCK_DGRAM, IPPROTO_UDP, 7, "0.0.0.0", 0,
		    "0.0.0.0", 0, 0, ISK_RECORD, 0 },
		{ 7, AF_INET6, SOCK_STREAM, IPPROTO_TCP, 10, "::1", 40003,
		    "::", 0, 0, ISK_RECORD, 0 },
		{ 8, AF_INET6, SOCK_STREAM, IPPROTO_TCP, 8, "::ffff:127.0.0.1",
		    40004, "::ffff:127.0.0.1", 40005, 0, ISK_RECORD, 0 },
		{ 9, AF_INET, SOCK_STREAM, IPPROTO_TCP, 1, "127.0.0.1", 40005,
		    "127.0.0.1", 40004, 0, ISK_RECORD, 0 },
		{ 10, AF_INET, SOCK_STREAM, IPPROTO_TCP, 1, "10.1.2.3", 40006,
		    "10.9.9.9", 80, 0, ISK_RECORD, 0 },
		{ 11, AF_INET, SOCK_DGRAM, IPPROTO_UDP, 1, "127.0.0.1", 40007,
		    "127.0.0.1", 53, 0, ISK_RECORD, 0 },
		{ 20, 99, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1", 40008,
		    NULL, 0, 0, ISK_RECORD, 0 },
		{ 21, AF_INET6, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40009, NULL, 0, 1, ISK_RECORD, 0 },
		{ 22, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    70000, NULL, 0, 0, ISK_RECORD, 0 },
		{ 23, AF_INET, 99, IPPROTO_TCP, 10, "127.0.0.1", 40010, NULL,
		    0, 0, ISK_RECORD, 0 },
		{ 24, AF_INET, SOCK_STREAM, IPPROTO_TCP, 99, "127.0.0.1",
		    40011, NULL, 0, 0, ISK_RECORD, 0 },
		{ 25, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40012, NULL, 0, HUGE_WORDS, ISK_RECORD, 0 },
		{ 26, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40013, NULL, 0, 0, ISK_NORECORD, 0 },
		{ 27, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40014, NULL, 0, 0, ISK_NONE, 0 },
		{ 28, AF_INET, SOCK_STREAM, 99, 10, "127.0.0.1", 40015, NULL,
		    0, 0, ISK_RECORD, 0 },
		{ 29, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40016, NULL, 0, 0, ISK_REGTYPE, 0 },
		{ 30, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40017, NULL, 0, 0, ISK_OTHERID, 0 },
	};
	struct unit	*u = *state;
	struct files	 fs;
	json_t		*doc, *t;
	int		 fd;

	inet_files(&fs, k, sizeof k / sizeof k[0]);
	fd = write_image(u->ctx, &fs);
	files_free(&fs);
	doc = show(u->ctx, fd, 0);
	close(fd);
	assert_members(doc, 3, "inet", "stream", "tcp", "listening",
	    "127.0.0.1:40001", NULL, NULL);
	assert_members(doc, 4, "inet", "stream", "tcp", "established",
	    "127.0.0.1:40002", "127.0.0.1:40001", "1:5");
	assert_members(doc, 5, "inet", "stream", "tcp", "established",
	    "127.0.0.1:40001", "127.0.0.1:40002", "1:4");
	assert_members(doc, 6, "inet", "dgram", "udp", "unconnected", NULL,
	    NULL, NULL);
	assert_members(doc, 7, "inet6", "stream", "tcp", "listening",
	    "[::1]:40003", NULL, NULL);
	assert_members(doc, 8, "inet6", "stream", "tcp", "close-wait",
	    "[::ffff:127.0.0.1]:40004", "[::ffff:127.0.0.1]:40005", "1:9");
	assert_members(doc, 9, "inet", "stream", "tcp", "established",
	    "127.0.0.1:40005", "127.0.0.1:40004", "1:8");
	assert_members(doc, 10, "inet", "stream", "tcp", "established",
	    "10.1.2.3:40006", "10.9.9.9:80", "external");
	assert_members(doc, 11, "inet", "dgram", "udp", "connected",
	    "127.0.0.1:40007", "127.0.0.1:53", "external");
	assert_members(doc, 20, "unknown", "stream", "tcp", "listening",
	    "unknown", "unknown", NULL);
	assert_members(doc, 21, "inet6", "stream", "tcp", "listening",
	    "unknown", "unknown", NULL);
	assert_members(doc, 22, "inet", "stream", "tcp", "listening",
	    "unknown", "unknown", NULL);
	assert_members(doc, 23, "inet", "unknown", "unknown", "unknown",
	    "127.0.0.1:40010", NULL, NULL);
	assert_members(doc, 24, "inet", "stream", "tcp", "unknown",
	    "127.0.0.1:40011", NULL, NULL);
	assert_members(doc, 25, "inet", "stream", "tcp", "listening",
	    "unknown", "unknown", NULL);
	assert_members(doc, 26, "unknown", "unknown", "unknown", "unknown",
	    "unknown", "unknown", NULL);
	assert_members(doc, 27, "unknown", "unknown", "unknown", "unknown",
	    "unknown", "unknown", NULL);
	assert_members(doc, 28, "inet", "stream", "unknown", "unknown",
	    "127.0.0.1:40015", NULL, NULL);
	assert_members(doc, 29, "unknown", "unknown", "unknown", "unknown",
	    "unknown", "unknown", NULL);
	assert_members(doc, 30, "unknown", "unknown", "unknown", "unknown",
	    "unknown", "unknown", NULL);
	t = json_object_get(json_object_get(doc, "descriptors"), "totals");
	assert_int_equal(json_integer_value(json_object_get(t, "sockets")),
	    sizeof k / sizeof k[0]);
	assert_int_equal(json_integer_value(json_object_get(t, "files")), 0);
	json_decref(doc);
}

/*
 * gpurestore's check before criu restores: the ports a process here
 * holds, TCP and UDP, said with the process, and one that a closed
 * connection holds (TIME_WAIT); an address this host lacks,
 * for a listening socket and for a connection (which --tcp-close lets
 * through); a network namespace of the tree's own, not checked; an
 * image without files.img, or without inet sockets, untouched.
 */
static void
test_inet_restore_check(void **state)
{
	struct isk	 k[3] = {
		{ 3, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1", 0,
		    "0.0.0.0", 0, 0, ISK_RECORD, 0 },
		{ 4, AF_INET, SOCK_DGRAM, IPPROTO_UDP, 7, "127.0.0.1", 0,
		    "0.0.0.0", 0, 0, ISK_RECORD, 0 },
		{ 5, AF_INET, SOCK_STREAM, IPPROTO_TCP, 1, "127.0.0.1", 0,
		    "127.0.0.1", 0, 0, ISK_RECORD, 0 },
	};
	struct unit	*u = *state;
	struct files	 fs;
	char		 msg[512], comm[64];
	pid_t		 child;
	int		 tport, uport, dfd;

	/* free ports, and a connection of 127.0.0.1 */
	k[0].sport = (uint32_t)free_port(SOCK_STREAM);
	k[1].sport = (uint32_t)free_port(SOCK_DGRAM);
	k[2].sport = 40100;
	k[2].dport = 40101;
	assert_gck_ok(u->ctx, restore_check(u, k, 3, 0));
	/* taken by another process */
	child = hold(1, &tport, &uport);
	comm_of(child, comm, sizeof comm);
	k[0].sport = (uint32_t)tport;
	k[1].sport = (uint32_t)uport;
	snprintf(msg, sizeof msg, "cannot restore: the image's process %d "
	    "listens on TCP 127.0.0.1:%d, which process %d ('%s') holds on "
	    "this host", PID, tport, (int)child, comm);
	assert_gck_fails(u->ctx, restore_check(u, k, 3, 0), GCK_EBUSY, msg);
	snprintf(msg, sizeof msg, "cannot restore: the image's process %d "
	    "is bound to UDP 127.0.0.1:%d, which process %d ('%s') holds on "
	    "this host", PID, uport, (int)child, comm);
	assert_gck_fails(u->ctx, restore_check(u, k + 1, 2, 0), GCK_EBUSY,
	    msg);
	/* in a network namespace of the tree's own, not this host's */
	k[0].ns_id = k[1].ns_id = NETNS + 1;
	assert_gck_ok(u->ctx, restore_check(u, k, 2, 0));
	k[0].ns_id = k[1].ns_id = 0;
	kill(child, SIGKILL);
	assert_int_equal(waitpid(child, NULL, 0), child);
	k[0].sport = (uint32_t)free_port(SOCK_STREAM);
	k[1].sport = (uint32_t)free_port(SOCK_DGRAM);
	assert_gck_ok(u->ctx, restore_check(u, k, 3, 0));
	/* held by a connection closed, which no process holds */
	k[0].sport = (uint32_t)(tport = time_wait());
	snprintf(msg, sizeof msg, "cannot restore: the image's process %d "
	    "listens on TCP 127.0.0.1:%d, which a closed connection still "
	    "holds on this host (for a minute at most)", PID, tport);
	assert_gck_fails(u->ctx, restore_check(u, k, 1, 0), GCK_EBUSY, msg);
	k[0].sport = (uint32_t)free_port(SOCK_STREAM);

	/* an address this host lacks (unless it has it: then skipped) */
	if (lacks(NOADDR)) {
		k[2].src = NOADDR;
		k[2].sport = 5000;
		k[2].dst = "192.0.2.20";
		k[2].dport = 6379;
		assert_gck_fails(u->ctx, restore_check(u, k, 3, 0), GCK_EINVAL,
		    "cannot restore: process 1's TCP connection "
		    "192.0.2.10:5000 -> 192.0.2.20:6379 needs the address "
		    "192.0.2.10, which this host lacks: restore with "
		    "--tcp-close to have it closed (its process sees the "
		    "connection reset)");
		assert_gck_ok(u->ctx, restore_check(u, k, 3, 1));
		k[0].src = NOADDR;
		k[0].sport = 6379;
		assert_gck_fails(u->ctx, restore_check(u, k, 3, 1), GCK_EINVAL,
		    "cannot restore: the image's process 1 listens on TCP "
		    "192.0.2.10:6379, and this host lacks the address "
		    "192.0.2.10");
	}

	/* no files.img at all; one without inet sockets */
	inet_files(&fs, k, 3);
	free(fs.f[1].b.p);
	fs.f[1] = fs.f[--fs.n];
	dfd = write_dir(u, &fs);
	files_free(&fs);
	assert_gck_ok(u->ctx, gck_needs_restore_check(u->ctx, dfd, NULL, NULL,
	    0));
	close(dfd);
	criu_files(u, &fs);
	dfd = write_dir(u, &fs);
	files_free(&fs);
	assert_gck_ok(u->ctx, gck_needs_restore_check(u->ctx, dfd, NULL, NULL,
	    0));
	close(dfd);
}

/*
 * Records that lie, each refused by gpurestore's check with one line,
 * whatever the host: the lies of test_inet_descriptors(); a files.img
 * that lists a socket twice, the second on port 70000 (criu restore
 * takes the last, the check took the first and let it by: the tree was
 * restored, listening on port 4464); and a files.img that does not parse.
 */
static void
test_inet_lies(void **state)
{
	static const struct {
		struct isk	 k;
		const char	*msg;
	} t[] = {
		{ { 3, 99, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1", 40008,
		    NULL, 0, 0, ISK_RECORD, 0 }, "corrupt image: the inet "
		    "socket of fd 3 of process 1 records an unknown family "
		    "(99)" },
		{ { 3, AF_INET6, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40009, NULL, 0, 1, ISK_RECORD, 0 }, "corrupt image: the "
		    "inet socket of fd 3 of process 1 records an address of 1 "
		    "words for IPv6" },
		{ { 3, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    70000, NULL, 0, 0, ISK_RECORD, 0 }, "corrupt image: the "
		    "inet socket of fd 3 of process 1 records a port above "
		    "65535 (70000)" },
		{ { 3, AF_INET, 99, IPPROTO_TCP, 10, "127.0.0.1", 40010, NULL,
		    0, 0, ISK_RECORD, 0 }, "corrupt image: the inet socket of "
		    "fd 3 of process 1 records an unknown type (99)" },
		{ { 3, AF_INET, SOCK_STREAM, 99, 10, "127.0.0.1", 40010, NULL,
		    0, 0, ISK_RECORD, 0 }, "corrupt image: the inet socket of "
		    "fd 3 of process 1 records an unknown protocol (99)" },
		{ { 3, AF_INET, SOCK_STREAM, IPPROTO_TCP, 99, "127.0.0.1",
		    40011, NULL, 0, 0, ISK_RECORD, 0 }, "corrupt image: the "
		    "inet socket of fd 3 of process 1 records an unknown "
		    "state (99)" },
		{ { 3, AF_INET, SOCK_DGRAM, IPPROTO_UDP, 10, "127.0.0.1",
		    40011, NULL, 0, 0, ISK_RECORD, 0 }, "corrupt image: the "
		    "inet socket of fd 3 of process 1 records a listening "
		    "socket that is not TCP" },
		{ { 3, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40012, NULL, 0, HUGE_WORDS, ISK_RECORD, 0 }, "corrupt "
		    "image: the inet socket of fd 3 of process 1 records an "
		    "address of 200000 words for IPv4" },
		{ { 3, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40013, NULL, 0, 0, ISK_NORECORD, 0 }, "corrupt image: fd 3 "
		    "of process 1 is an inet socket (id 100) that 'files.img' "
		    "lacks" },
		{ { 3, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40014, NULL, 0, 0, ISK_NONE, 0 }, "corrupt image: fd 3 of "
		    "process 1 is an inet socket (id 100) that 'files.img' "
		    "lacks" },
		{ { 3, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40015, NULL, 0, 0, ISK_REGTYPE, 0 }, "corrupt image: fd 3 "
		    "of process 1 is an inet socket (id 100) that 'files.img' "
		    "lacks" },
		{ { 3, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40016, NULL, 0, 0, ISK_OTHERID, 0 }, "corrupt image: fd 3 "
		    "of process 1 is an inet socket (id 100) that 'files.img' "
		    "lacks" },
		{ { 3, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1",
		    40017, NULL, 0, 0, ISK_TWICE, 0 }, "corrupt image: "
		    "'files.img' lists file id 100 twice" },
	};
	struct unit	*u = *state;
	struct files	 fs;
	json_t		*doc;
	size_t		 i, n = sizeof t / sizeof t[0];
	int		 dfd, fd;

	for (i = 0; i < n; i++) {
		assert_gck_fails(u->ctx, restore_check(u, &t[i].k, 1, 0),
		    GCK_EFORMAT, t[i].msg);
		assert_gck_fails(u->ctx, restore_check(u, &t[i].k, 1, 1),
		    GCK_EFORMAT, t[i].msg);
	}
	/* the socket listed twice: gpuinspect does not know what is open */
	inet_files(&fs, &t[n - 1].k, 1);
	fd = write_image(u->ctx, &fs);
	files_free(&fs);
	doc = show(u->ctx, fd, 0);
	close(fd);
	assert_true(json_is_null(json_object_get(doc, "descriptors")));
	assert_string_equal(json_string_value(json_object_get(doc,
	    "descriptors_error")), t[n - 1].msg);
	json_decref(doc);
	/* files.img cut in its first record */
	inet_files(&fs, &t[0].k, 1);
	fs.f[1].b.len -= 3;
	dfd = write_dir(u, &fs);
	files_free(&fs);
	assert_gck_fails(u->ctx, gck_needs_restore_check(u->ctx, dfd, NULL,
	    NULL, 0), GCK_EFORMAT, "corrupt image: cannot read 'files.img'");
	close(dfd);
}

/*
 * gpuinspect --check: a listening port taken here, a connection whose
 * address this host lacks (where it lacks it), a socket files.img lacks:
 * a failure each, in the words of gpurestore's check.
 */
static void
test_inet_check(void **state)
{
	struct isk	 k[3] = {
		{ 3, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10, "127.0.0.1", 0,
		    "0.0.0.0", 0, 0, ISK_RECORD, 0 },
		{ 4, AF_INET, SOCK_STREAM, IPPROTO_TCP, 1, NOADDR, 5000,
		    "192.0.2.20", 6379, 0, ISK_RECORD, 0 },
		{ 5, AF_INET, SOCK_STREAM, IPPROTO_TCP, 1, "127.0.0.1", 1,
		    "127.0.0.1", 2, 0, ISK_NONE, 0 },
	};
	struct unit	*u = *state;
	struct files	 fs;
	json_t		*doc, *fl, *f, *want;
	char		*text = NULL, msg[512], comm[64];
	size_t		 i;
	pid_t		 child;
	int		 tport, uport, fd, fail = 0;

	child = hold(0, &tport, &uport);
	comm_of(child, comm, sizeof comm);
	k[0].sport = (uint32_t)tport;
	inet_files(&fs, k, 3);
	fd = write_image(u->ctx, &fs);
	files_free(&fs);
	if (gck_inspect_check(u->ctx, fd, &text, &fail) != GCK_OK)
		fail_msg("check: %s", gck_error_string(u->ctx));
	close(fd);
	kill(child, SIGKILL);
	assert_int_equal(waitpid(child, NULL, 0), child);
	assert_int_equal(fail, 1);
	assert_non_null(doc = json_loads(text, 0, NULL));
	free(text);
	/* (pid 1 is in use here: a note, left out) */
	assert_non_null(fl = json_array());
	json_array_foreach(json_object_get(doc, "findings"), i, f)
		if (strcmp(json_string_value(json_object_get(f, "what")),
		    "pid") != 0)
			json_array_append(fl, f);
	snprintf(msg, sizeof msg, "the image's process %d listens on TCP "
	    "127.0.0.1:%d, which process %d ('%s') holds on this host", PID,
	    tport, (int)child, comm);
	assert_non_null(want = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, "
	    "{s:s, s:s, s:s}]", "severity", "fail", "what", "port", "message",
	    msg, "severity", "fail", "what", "address", "message",
	    "process 1's TCP connection 192.0.2.10:5000 -> 192.0.2.20:6379 "
	    "needs the address 192.0.2.10, which this host lacks: restore with "
	    "gpurestore --tcp-close to have it closed (its process sees the "
	    "connection reset)", "severity", "fail", "what", "socket",
	    "message", "corrupt image: fd 5 of process 1 is an inet socket "
	    "(id 102) that 'files.img' lacks"));
	/* where this host has 192.0.2.10, the connection passes */
	if (!lacks(NOADDR))
		assert_int_equal(json_array_remove(want, 1), 0);
	if (!json_equal(fl, want)) {
		char	*s = json_dumps(fl, JSON_INDENT(2));

		fail_msg("findings: %s", s);
	}
	assert_true(json_is_false(json_object_get(doc, "ok")));
	json_decref(want);
	json_decref(fl);
	json_decref(doc);
}

/*
 * gpuinspect --check: a descriptor of type file that names an inet
 * socket, and a unix socket and a pipe that files.img lacks, which criu
 * restore refuses ("No file for fd"): a failure each, where --check said
 * that a restore would work.
 */
static void
test_fds_lacking(void **state)
{
	struct isk	 k = { 3, AF_INET, SOCK_STREAM, IPPROTO_TCP, 10,
			    "127.0.0.1", 0, "0.0.0.0", 0, 0, ISK_RECORD, 0 };
	struct unit	*u = *state;
	struct files	 fs;
	json_t		*doc, *fl, *f, *want;
	char		*text = NULL;
	size_t		 i;
	int		 fd, fail = 0;

	k.sport = (uint32_t)free_port(SOCK_STREAM);
	inet_files(&fs, &k, 1);
	assert_string_equal(fs.f[2].name, "fdinfo-9.img");
	add_fd(&fs.f[2].b, 6, 1, 100);
	add_fd(&fs.f[2].b, 7, 5, 200);
	add_fd(&fs.f[2].b, 8, 2, 201);
	fd = write_image(u->ctx, &fs);
	files_free(&fs);
	if (gck_inspect_check(u->ctx, fd, &text, &fail) != GCK_OK)
		fail_msg("check: %s", gck_error_string(u->ctx));
	close(fd);
	assert_int_equal(fail, 1);
	assert_non_null(doc = json_loads(text, 0, NULL));
	free(text);
	/* (pid 1 is in use here: a note, left out) */
	assert_non_null(fl = json_array());
	json_array_foreach(json_object_get(doc, "findings"), i, f)
		if (strcmp(json_string_value(json_object_get(f, "what")),
		    "pid") != 0)
			json_array_append(fl, f);
	assert_non_null(want = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}, "
	    "{s:s, s:s, s:s}]", "severity", "fail", "what", "file", "message",
	    "corrupt image: fd 6 of process 1 is a file (id 100) that "
	    "'files.img' lacks", "severity", "fail", "what", "file",
	    "message", "corrupt image: fd 7 of process 1 is a unix socket (id "
	    "200) that 'files.img' lacks", "severity", "fail", "what", "file",
	    "message", "corrupt image: fd 8 of process 1 is a pipe (id 201) "
	    "that 'files.img' lacks"));
	if (!json_equal(fl, want)) {
		char	*s = json_dumps(fl, JSON_INDENT(2));

		fail_msg("findings: %s", s);
	}
	json_decref(want);
	json_decref(fl);
	json_decref(doc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		unit_dir_test(test_descriptors),
		unit_dir_test(test_check),
		unit_dir_test(test_manifest_only),
		unit_dir_test(test_inet_descriptors),
		unit_dir_test(test_inet_restore_check),
		unit_dir_test(test_inet_lies),
		unit_dir_test(test_inet_check),
		unit_dir_test(test_fds_lacking),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
