/*
 * needs.c: what a restore of an image needs of the host that takes it.
 *
 * gck_needs_read() reads the small CRIU images at the head of an image,
 * up to its first pages file: the process tree (pstree.img), each
 * process's descriptor table (ids-PID.img names its fdinfo-N.img), its
 * working and root directories (fs-PID.img), and the files, sockets and
 * pipes they name (files.img, remap-fpath.img).  gck_needs_doc() turns
 * them into the "descriptors" member of gpuinspect's document, which
 * gpuinspect(1) documents.  gck_inspect_check() compares what it lists,
 * and the image's PIDs and GPUs, with this host.  The TCP and UDP
 * sockets are tried against this host as criu restore would bind them
 * (inet.c): by gck_inspect_check(), and by gck_needs_restore_check(),
 * which gpurestore runs before criu restore.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "private.h"
#include "core/proc.h"
#include "core/util.h"
#include "criu/criu.h"
#include "criu/pagemap.h"
#include "criu/streamer.h"
#include "gpu/cuda.h"
#include "gpu/gpumap.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/names.h"
#include "ops/inet.h"
#include "ops/needs.h"
#include "criu/criu-images.pb-c.h"

#define NAME_LEN	256
#define KEEP_MAX	(16u << 20)	/* one kept CRIU image */
#define KEEP_TOTAL	(64u << 20)	/* all of them */

/* CRIU's magics (criu/include/magic.h) */
#define INVENTORY_MAGIC		0x58313116u	/* no common magic before */
#define PSTREE_MAGIC		0x50273030u
#define FDINFO_MAGIC		0x56213732u
#define IDS_MAGIC		0x54432030u
#define FS_MAGIC		0x51403912u
#define REMAP_FPATH_MAGIC	0x59133954u

/* CRIU's fd_types (images/fdinfo.proto), and its remap_type GHOST */
#define FD_REG		1
#define FD_PIPE		2
#define FD_INETSK	4
#define FD_UNIXSK	5
#define REMAP_GHOST	1

/* The socket states of the kernel's TCP_* that unix sockets take. */
#define SK_ESTABLISHED	1
#define SK_CLOSE	7
#define SK_LISTEN	10

#define KEY_LEN		(2 * GCK_INET_ADDRLEN + 32)	/* an inet end */

/* A small CRIU image, kept whole. */
struct nfile {
	char		*name;
	char		*data;
	size_t		 len;
	int		 borrowed;	/* data is another's: not freed */
};

struct gck_needs {
	struct nfile	*f;
	size_t		 n, cap, total;
	FileEntry	**fe;		/* files.img, by id */
	size_t		 nfe, capfe;
	RemapFilePathEntry **rm;	/* remap-fpath.img */
	size_t		 nrm, caprm;
};

/* A check of the inet sockets against this host (check_inet()). */
struct icheck {
	struct gck_ctx			*ctx;
	const struct gck_needs		*nd;
	const struct gck_manifest	*m;		/* or NULL */
	json_t				*fl;		/* findings, or NULL */
	json_t				*seen;		/* the sockets' ids */
	struct gck_inet_host		*host;		/* or NULL */
	int64_t				 netns;		/* criu's, or -1 */
	int				 tcp_close;
	int				 own;	/* some in another netns */
};

static const char *const fd_types[] = { "unknown", "file", "pipe", "fifo",
	"inet", "unix", "eventfd", "eventpoll", "inotify", "signalfd",
	"packet", "tty", "fanotify", "netlink", "ns", "tun", "ext", "timerfd",
	"memfd", "bpfmap", "pidfd" };

static int	 wanted(const char *);
static long	 nwanted(const struct gck_manifest *);
static int	 keep(struct gck_ctx *, struct gck_reader *,
		    struct gck_needs *, const char *, uint64_t);
static const struct nfile *nfind(const struct gck_needs *, const char *);
static int	 fe_cmp(const void *, const void *);
static int	 index_files(struct gck_ctx *, struct gck_needs *);
static const FileEntry *file_by_id(const struct gck_needs *, uint32_t);
static const FileEntry *file_of(const struct gck_needs *, uint32_t,
		    uint32_t);
static int	 ghost(const struct gck_needs *, uint32_t);
static const char *reg_path(const struct gck_needs *, uint32_t);
static const uint8_t *first(const struct gck_needs *, const char *,
		    uint32_t, uint32_t *);
static const char *acc_mode(uint32_t);
static int	 reg_doc(const struct gck_needs *, json_t *,
		    const RegFileEntry *);
static int	 usk_doc(json_t *, const UnixSkEntry *);
static int	 isk_doc(json_t *, const InetSkEntry *);
static json_t	*fd_doc(const struct gck_needs *, const FdinfoEntry *);
static int	 proc_fds(const struct gck_needs *, uint32_t, json_t *);
static json_t	*proc_doc(const struct gck_needs *, uint32_t);
static json_t	*end_name(json_t *, json_t *);
static const char *num_key(json_t *, const char *, char *, size_t);
static int	 add_end(json_t *, const char *, json_t *);
static const char *inet_end(json_t *, int, char *, size_t);
static json_t	*sock_end(json_t *, const char *, json_t *);
static int	 ends_collect(json_t *, json_t *, json_t *);
static int	 ends_link(json_t *, json_t *, json_t *);
static json_t	*pipes_list(json_t *, json_t *);
static const char *kind(uint32_t);
static json_t	*fd_ids(json_t *);
static json_t	*files_doc(const struct gck_needs *, json_t *);
static int	 in_array(json_t *, json_t *);
static void	 root_ids(const struct gck_needs *, int64_t *, int64_t *,
		    int *);
static json_t	*mnt_doc(const struct gck_needs *, json_t *);
static json_t	*totals(json_t *, json_t *, json_t *);
static json_t	*procs_doc(const struct gck_needs *);
static void	 finding(json_t *, const char *, const char *, const char *,
		    ...) __attribute__((__format__(__printf__, 4, 5)));
static void	 check_files(json_t *, json_t *);
static void	 check_dir(json_t *, const char *, const char *, json_t *);
static void	 check_socket(json_t *, json_t *, json_t *);
static void	 check_paths(json_t *, json_t *);
static void	 check_mounts(const struct gck_manifest *, json_t *);
static void	 check_fds(json_t *, json_t *);
static void	 check_pids(const struct gck_manifest *, json_t *);
static int	 problem(struct gck_ctx *, json_t *, int, const char *,
		    const char *, ...) __attribute__((__format__(__printf__, 5,
		    6)));
static int	 source_holds(const struct gck_manifest *, pid_t);
static int	 inet_fd(struct icheck *, const struct gck_inet *, uint32_t);
static int	 proc_inet(struct icheck *, uint32_t);
static int	 check_inet(struct gck_ctx *, const struct gck_needs *,
		    const struct gck_manifest *, int, json_t *);
static int	 load(struct gck_ctx *, struct gck_needs *, int,
		    const struct gck_serve *, const char *);
static int	 load_procs(struct gck_ctx *, struct gck_needs *, int,
		    const struct gck_serve *);
static void	 check_gpus(struct gck_ctx *, const struct gck_manifest *,
		    json_t *);
static void	 check_criu(struct gck_ctx *, const struct gck_manifest *,
		    json_t *);

static int
wanted(const char *name)
{
	return strcmp(name, "files.img") == 0 ||
	    strcmp(name, "pstree.img") == 0 ||
	    strcmp(name, "inventory.img") == 0 ||
	    strcmp(name, "remap-fpath.img") == 0 ||
	    strncmp(name, "fdinfo-", 7) == 0 || strncmp(name, "ids-", 4) == 0 ||
	    strncmp(name, "fs-", 3) == 0;
}

/* Keeps the current file of rd, name, whole. */
static int
keep(struct gck_ctx *ctx, struct gck_reader *rd, struct gck_needs *nd,
    const char *name, uint64_t first)
{
	struct nfile	*f;
	size_t		 cap = first < KEEP_MAX ? (size_t)first + 1 : KEEP_MAX;
	ssize_t		 n;
	char		*p;
	int		 r;

	if ((r = gck_grow(ctx, &nd->f, &nd->cap, nd->n, sizeof *nd->f)) !=
	    GCK_OK)
		return r;
	f = &nd->f[nd->n];
	memset(f, 0, sizeof *f);
	if ((f->name = strdup(name)) == NULL ||
	    (f->data = malloc(cap)) == NULL) {
		free(f->name);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	nd->n++;
	for (;;) {
		if (f->len == cap) {
			if (cap >= KEEP_MAX || nd->total + cap > KEEP_TOTAL)
				return gck_set_error(ctx, GCK_EFORMAT,
				    "corrupt image: '%s' is too large", name);
			if ((p = realloc(f->data, cap * 2)) == NULL)
				return gck_set_error(ctx, GCK_ENOMEM,
				    "out of memory");
			f->data = p;
			cap *= 2;
		}
		if ((n = gck_reader_file_read(rd, f->data + f->len,
		    cap - f->len)) < 0)
			return gck_error_code(ctx);
		if (n == 0)
			break;
		f->len += (size_t)n;
	}
	nd->total += f->len;
	return GCK_OK;
}

/*
 * How many of the CRIU images that the manifest m lists are wanted: once
 * they are read, nothing more is (-1: m lists none).
 */
static long
nwanted(const struct gck_manifest *m)
{
	json_t	*f;
	size_t	 i;
	long	 n = 0;

	if (!gck_manifest_has_file_list(m))
		return -1;
	json_array_foreach(json_object_get(gck_manifest_json(m), "files"), i,
	    f)
		if (json_is_string(json_object_get(f, "name")) &&
		    wanted(json_string_value(json_object_get(f, "name"))))
			n++;
	return n;
}

/*
 * Reads the CRIU images of rd, whose head (m) has been read, and keeps
 * those that say what the processes have open: up to the last of them
 * that m lists, or without such a list up to the first pages file (or
 * the end).  Returns GCK_OK with *ndp, or a code.
 */
int
gck_needs_read(struct gck_ctx *ctx, struct gck_reader *rd,
    const struct gck_manifest *m, struct gck_needs **ndp)
{
	struct gck_needs	*nd;
	char			 name[NAME_LEN];
	uint64_t		 size;
	unsigned		 id;
	long			 left = nwanted(m);
	int			 r;

	*ndp = NULL;
	if ((nd = calloc(1, sizeof *nd)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	while (left != 0) {
		if ((r = gck_reader_file(rd, name, sizeof name, &size)) == 1)
			break;
		if (r != 0)
			goto out;
		/* The memory comes last: all that is needed is read. */
		if (gck_pages_id(name, &id))
			break;
		if (!wanted(name))
			continue;
		if ((r = keep(ctx, rd, nd, name, size)) != GCK_OK)
			goto out;
		if (left > 0 && gck_manifest_has_file(m, name))
			left--;
	}
	if ((r = index_files(ctx, nd)) != GCK_OK)
		goto out;
	*ndp = nd;
	nd = NULL;
	r = GCK_OK;
out:
	gck_needs_free(nd);
	return r;
}

void
gck_needs_free(struct gck_needs *nd)
{
	size_t	i;

	if (nd == NULL)
		return;
	for (i = 0; i < nd->n; i++) {
		free(nd->f[i].name);
		if (!nd->f[i].borrowed)
			free(nd->f[i].data);
	}
	for (i = 0; i < nd->nfe; i++)
		file_entry__free_unpacked(nd->fe[i], NULL);
	for (i = 0; i < nd->nrm; i++)
		remap_file_path_entry__free_unpacked(nd->rm[i], NULL);
	free(nd->f);
	free(nd->fe);
	free(nd->rm);
	free(nd);
}

static const struct nfile *
nfind(const struct gck_needs *nd, const char *name)
{
	size_t	i;

	for (i = 0; i < nd->n; i++)
		if (strcmp(nd->f[i].name, name) == 0)
			return &nd->f[i];
	return NULL;
}

static int
fe_cmp(const void *a, const void *b)
{
	const FileEntry	*x = *(FileEntry *const *)a;
	const FileEntry	*y = *(FileEntry *const *)b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Unpacks files.img, sorted by id, and remap-fpath.img. */
static int
index_files(struct gck_ctx *ctx, struct gck_needs *nd)
{
	const struct nfile	*f;
	const uint8_t		*rec;
	size_t			 pos, i;
	uint32_t		 len;
	int			 bad = 0, r;

	if ((f = nfind(nd, "files.img")) != NULL) {
		if (gck_img_start(f->data, f->len, GCK_FILES_MAGIC, &pos) == -1)
			bad = 1;
		while (!bad && (rec = gck_img_record(f->data, f->len, &pos,
		    &len, &bad)) != NULL) {
			if ((r = gck_grow(ctx, &nd->fe, &nd->capfe, nd->nfe,
			    sizeof *nd->fe)) != GCK_OK)
				return r;
			if ((nd->fe[nd->nfe] = file_entry__unpack(NULL, len,
			    rec)) == NULL)
				bad = 1;
			else
				nd->nfe++;
		}
		if (bad)
			return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: "
			    "cannot read 'files.img'");
		if (nd->nfe > 1)
			qsort(nd->fe, nd->nfe, sizeof *nd->fe, fe_cmp);
		/* criu would take the last of them, a reader any */
		for (i = 1; i < nd->nfe; i++)
			if (nd->fe[i]->id == nd->fe[i - 1]->id)
				return gck_set_error(ctx, GCK_EFORMAT,
				    "corrupt image: 'files.img' lists file id "
				    "%" PRIu32 " twice", nd->fe[i]->id);
	}
	if ((f = nfind(nd, "remap-fpath.img")) == NULL)
		return GCK_OK;
	if (gck_img_start(f->data, f->len, REMAP_FPATH_MAGIC, &pos) == -1)
		bad = 1;
	while (!bad && (rec = gck_img_record(f->data, f->len, &pos, &len,
	    &bad)) != NULL) {
		if ((r = gck_grow(ctx, &nd->rm, &nd->caprm, nd->nrm,
		    sizeof *nd->rm)) != GCK_OK)
			return r;
		if ((nd->rm[nd->nrm] = remap_file_path_entry__unpack(NULL,
		    len, rec)) == NULL)
			bad = 1;
		else
			nd->nrm++;
	}
	if (bad)
		return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: cannot "
		    "read 'remap-fpath.img'");
	return GCK_OK;
}

static const FileEntry *
file_by_id(const struct gck_needs *nd, uint32_t id)
{
	FileEntry	 key, *kp = &key, **p;

	if (nd->nfe == 0)
		return NULL;
	key.id = id;
	p = bsearch(&kp, nd->fe, nd->nfe, sizeof *nd->fe, fe_cmp);
	return p != NULL ? *p : NULL;
}

/*
 * The file of id that criu restore gives a descriptor of fd_types type:
 * one of that type, carrying its record, whose id is the file's (criu
 * finds a file by type and id, and refuses a record of another id), or
 * NULL.
 */
static const FileEntry *
file_of(const struct gck_needs *nd, uint32_t id, uint32_t type)
{
	const FileEntry	*fe = file_by_id(nd, id);

	if (fe == NULL || fe->type != type)
		return NULL;
	switch (type) {
	case FD_REG:
		return fe->reg != NULL && fe->reg->id == id ? fe : NULL;
	case FD_PIPE:
		return fe->pipe != NULL && fe->pipe->id == id ? fe : NULL;
	case FD_INETSK:
		return fe->isk != NULL && fe->isk->id == id ? fe : NULL;
	case FD_UNIXSK:
		return fe->usk != NULL && fe->usk->id == id ? fe : NULL;
	default:
		return fe;
	}
}

/*
 * A JSON string of the len bytes at s (a path, an address): where they
 * are not UTF-8, a copy with each byte of 0x80 and above as '?'; NULL
 * only when out of memory.
 */
json_t *
gck_needs_jstr(const char *s, size_t len)
{
	json_t	*v;
	char	*c;
	size_t	 i;

	if ((v = json_stringn(s, len)) != NULL || (c = malloc(len + 1)) ==
	    NULL)
		return v;
	for (i = 0; i < len; i++)
		c[i] = (unsigned char)s[i] >= 0x80 || s[i] == '\0' ? '?' :
		    s[i];
	c[len] = '\0';
	v = json_string(c);
	free(c);
	return v;
}

/* Whether the file of id travels in the image (it was unlinked). */
static int
ghost(const struct gck_needs *nd, uint32_t id)
{
	size_t	i;

	for (i = 0; i < nd->nrm; i++)
		if (nd->rm[i]->orig_id == id &&
		    nd->rm[i]->remap_type == REMAP_GHOST)
			return 1;
	return 0;
}

/* The path of the regular file id of files.img, or NULL. */
static const char *
reg_path(const struct gck_needs *nd, uint32_t id)
{
	const FileEntry	*fe = file_of(nd, id, FD_REG);

	return fe != NULL ? fe->reg->name : NULL;
}

/* The first record of CRIU image name (of magic), *lenp bytes, or NULL. */
static const uint8_t *
first(const struct gck_needs *nd, const char *name, uint32_t magic,
    uint32_t *lenp)
{
	const struct nfile	*f;

	if ((f = nfind(nd, name)) == NULL)
		return NULL;
	return gck_img_first(f->data, f->len, magic, lenp);
}

/* "r", "w" or "rw", as open flags fl give a file. */
static const char *
acc_mode(uint32_t fl)
{
	switch (fl & O_ACCMODE) {
	case O_RDONLY:
		return "r";
	case O_WRONLY:
		return "w";
	default:
		return "rw";
	}
}

/* The members of a descriptor on a regular file (or directory). */
static int
reg_doc(const struct gck_needs *nd, json_t *o, const RegFileEntry *re)
{
	int	gh = ghost(nd, re->id);

	return json_object_set_new(o, "path", re->name != NULL ?
	    gck_needs_jstr(re->name, strlen(re->name)) : json_null()) != 0 ||
	    json_object_set_new(o, "size", re->has_size ?
	    json_integer((json_int_t)re->size) : json_null()) != 0 ||
	    json_object_set_new(o, "pos", json_integer((json_int_t)
	    re->pos)) != 0 ||
	    json_object_set_new(o, "mode", json_string(acc_mode(re->flags))) !=
	    0 ||
	    json_object_set_new(o, "append", json_boolean(re->flags &
	    O_APPEND)) != 0 ||
	    json_object_set_new(o, "flags", json_integer(re->flags)) != 0 ||
	    json_object_set_new(o, "ghost", json_boolean(gh)) != 0 ||
	    json_object_set_new(o, "mnt_id", re->has_mnt_id ?
	    json_integer(re->mnt_id) : json_null()) != 0 ? -1 : 0;
}

/* The members of a descriptor on a unix socket; "peer" comes later. */
static int
usk_doc(json_t *o, const UnixSkEntry *us)
{
	const char	*type, *state;
	json_t		*addr;
	char		*s;

	type = us->type == SOCK_STREAM ? "stream" : us->type == SOCK_DGRAM ?
	    "dgram" : us->type == SOCK_SEQPACKET ? "seqpacket" : "other";
	state = us->state == SK_LISTEN ? "listening" : us->state ==
	    SK_ESTABLISHED ? "connected" : us->state == SK_CLOSE ?
	    "unconnected" : "other";
	if (!us->has_name || us->name.len == 0)
		addr = json_null();
	else if (us->name.data[0] == '\0') {
		/* abstract: "@name", its NUL bytes as '@' too */
		if ((s = malloc(us->name.len + 1)) == NULL)
			return -1;
		memcpy(s, us->name.data, us->name.len);
		s[us->name.len] = '\0';
		for (size_t i = 0; i < us->name.len; i++)
			if (s[i] == '\0')
				s[i] = '@';
		addr = gck_needs_jstr(s, us->name.len);
		free(s);
	} else if (us->name_dir != NULL && us->name.data[0] != '/') {
		if (asprintf(&s, "%s/%.*s", us->name_dir, (int)us->name.len,
		    (const char *)us->name.data) == -1)
			return -1;
		addr = gck_needs_jstr(s, strlen(s));
		free(s);
	} else
		addr = gck_needs_jstr((const char *)us->name.data,
		    strnlen((const char *)us->name.data, us->name.len));
	return json_object_set_new(o, "socket_type", json_string(type)) != 0 ||
	    json_object_set_new(o, "state", json_string(state)) != 0 ||
	    json_object_set_new(o, "address", addr != NULL ? addr :
	    json_null()) != 0 ||
	    json_object_set_new(o, "abstract", json_boolean(us->has_name &&
	    us->name.len > 0 && us->name.data[0] == '\0')) != 0 ||
	    json_object_set_new(o, "ino", json_integer(us->ino)) != 0 ||
	    json_object_set_new(o, "peer_ino", us->peer != 0 ?
	    json_integer(us->peer) : json_null()) != 0 ? -1 : 0;
}

/*
 * The members of a descriptor on an inet socket, from its record ie (or
 * NULL: files.img lacks it), "unknown" where the record lies; "peer"
 * comes later.
 */
static int
isk_doc(json_t *o, const InetSkEntry *ie)
{
	struct gck_inet	 in;
	char		 a[GCK_INET_ADDRLEN], b[GCK_INET_ADDRLEN];

	if (ie != NULL)
		(void)gck_inet_read(ie, &in);
	else {
		memset(&in, 0, sizeof in);
		in.proto = -1;
	}
	gck_inet_addr(&in, 0, 1, a, sizeof a);
	gck_inet_addr(&in, 1, 1, b, sizeof b);
	return json_object_set_new(o, "family",
	    json_string(gck_inet_family(&in))) != 0 ||
	    json_object_set_new(o, "socket_type",
	    json_string(gck_inet_type(&in))) != 0 ||
	    json_object_set_new(o, "protocol",
	    json_string(gck_inet_proto(&in))) != 0 ||
	    json_object_set_new(o, "state",
	    json_string(gck_inet_state(&in))) != 0 ||
	    json_object_set_new(o, "address", in.addr && in.sport == 0 &&
	    gck_inet_any(&in, 0) ? json_null() : json_string(a)) != 0 ||
	    json_object_set_new(o, "peer_address", in.addr && in.dport == 0 ?
	    json_null() : json_string(b)) != 0 ? -1 : 0;
}

/* One descriptor of fdinfo-N.img, described. */
static json_t *
fd_doc(const struct gck_needs *nd, const FdinfoEntry *fi)
{
	const FileEntry	*fe = file_of(nd, fi->id, fi->type);
	json_t		*o;
	int		 bad = 0;

	if ((o = json_pack("{s:i, s:I, s:s}", "fd", (int)fi->fd, "id",
	    (json_int_t)fi->id, "type",
	    fi->type < sizeof fd_types / sizeof fd_types[0] ?
	    fd_types[fi->type] : "unknown")) == NULL)
		return NULL;
	if (fi->type == FD_REG && fe != NULL)
		bad = reg_doc(nd, o, fe->reg);
	else if (fi->type == FD_UNIXSK && fe != NULL)
		bad = usk_doc(o, fe->usk);
	else if (fi->type == FD_INETSK)
		bad = isk_doc(o, fe != NULL ? fe->isk : NULL);
	else if (fi->type == FD_PIPE && fe != NULL)
		bad = json_object_set_new(o, "pipe_id",
		    json_integer(fe->pipe->pipe_id)) != 0 ||
		    json_object_set_new(o, "mode",
		    json_string(acc_mode(fe->pipe->flags))) != 0;
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The descriptors of the table of files_id, into array fds. */
static int
proc_fds(const struct gck_needs *nd, uint32_t files_id, json_t *fds)
{
	const struct nfile	*f;
	const uint8_t		*rec;
	FdinfoEntry		*fi;
	char			 name[64];
	size_t			 pos;
	uint32_t		 len;
	json_t			*o;
	int			 bad = 0;

	snprintf(name, sizeof name, "fdinfo-%" PRIu32 ".img", files_id);
	if ((f = nfind(nd, name)) == NULL ||
	    gck_img_start(f->data, f->len, FDINFO_MAGIC, &pos) == -1)
		return -1;
	while ((rec = gck_img_record(f->data, f->len, &pos, &len, &bad)) !=
	    NULL) {
		if ((fi = fdinfo_entry__unpack(NULL, len, rec)) == NULL)
			return -1;
		o = fd_doc(nd, fi);
		fdinfo_entry__free_unpacked(fi, NULL);
		if (o == NULL || json_array_append_new(fds, o) != 0)
			return -1;
	}
	return bad ? -1 : 0;
}

/*
 * Process pid: its descriptors, working and root directories and mount
 * namespace; each null where the image does not tell.
 */
static json_t *
proc_doc(const struct gck_needs *nd, uint32_t pid)
{
	TaskKobjIdsEntry	*ids;
	FsEntry			*fs;
	const uint8_t		*rec;
	uint32_t		 len;
	json_t			*o, *fds = NULL;
	char			 name[64];
	const char		*cwd = NULL, *root = NULL;

	snprintf(name, sizeof name, "ids-%" PRIu32 ".img", pid);
	ids = (rec = first(nd, name, IDS_MAGIC, &len)) != NULL ?
	    task_kobj_ids_entry__unpack(NULL, len, rec) : NULL;
	snprintf(name, sizeof name, "fs-%" PRIu32 ".img", pid);
	fs = (rec = first(nd, name, FS_MAGIC, &len)) != NULL ?
	    fs_entry__unpack(NULL, len, rec) : NULL;
	if (fs != NULL) {
		cwd = reg_path(nd, fs->cwd_id);
		root = reg_path(nd, fs->root_id);
	}
	if (ids != NULL && ids->has_files_id && (fds = json_array()) != NULL &&
	    proc_fds(nd, ids->files_id, fds) != 0) {
		json_decref(fds);
		fds = NULL;
	}
	o = json_pack("{s:i, s:o, s:o, s:o, s:o}", "pid", (int)pid,
	    "mnt_ns_id", ids != NULL && ids->has_mnt_ns_id ?
	    json_integer(ids->mnt_ns_id) : json_null(),
	    "cwd", cwd != NULL ? gck_needs_jstr(cwd, strlen(cwd)) :
	    json_null(), "root", root != NULL ? gck_needs_jstr(root,
	    strlen(root)) : json_null(),
	    "fds", fds != NULL ? fds : json_null());
	if (ids != NULL)
		task_kobj_ids_entry__free_unpacked(ids, NULL);
	if (fs != NULL)
		fs_entry__free_unpacked(fs, NULL);
	return o;
}

/* "PID:FD" */
static json_t *
end_name(json_t *p, json_t *f)
{
	char	buf[48];

	snprintf(buf, sizeof buf, "%lld:%lld", (long long)json_integer_value(
	    json_object_get(p, "pid")), (long long)json_integer_value(
	    json_object_get(f, "fd")));
	return json_string(buf);
}

/* The key of member k of f, a number: "N". */
static const char *
num_key(json_t *f, const char *k, char *buf, size_t len)
{
	snprintf(buf, len, "%lld", (long long)json_integer_value(
	    json_object_get(f, k)));
	return buf;
}

/* Appends end e to the list of key in o. */
static int
add_end(json_t *o, const char *key, json_t *e)
{
	json_t	*a;

	if (e == NULL)
		return -1;
	if ((a = json_object_get(o, key)) == NULL &&
	    ((a = json_array()) == NULL || json_object_set_new(o, key, a) !=
	    0)) {
		json_decref(e);
		return -1;
	}
	return json_array_append_new(a, e);
}

/*
 * The key of inet socket f among the ends: its protocol, its address and
 * its peer's (swapped: the peer's, then its own), an IPv4 address
 * mapped into IPv6 as the IPv4 one; NULL unless f is an inet socket
 * whose two addresses are known.
 */
static const char *
inet_end(json_t *f, int swapped, char *buf, size_t len)
{
	const char	*ab[2], *s;
	char		 n[2][GCK_INET_ADDRLEN];
	size_t		 i;

	ab[0] = json_string_value(json_object_get(f, "address"));
	ab[1] = json_string_value(json_object_get(f, "peer_address"));
	if (strcmp(json_string_value(json_object_get(f, "type")), "inet") !=
	    0 || ab[0] == NULL || ab[1] == NULL ||
	    strcmp(ab[0], "unknown") == 0 || strcmp(ab[1], "unknown") == 0)
		return NULL;
	for (i = 0; i < 2; i++) {
		/* "[::ffff:a.b.c.d]:port" is "a.b.c.d:port" */
		s = ab[i];
		if (strncmp(s, "[::ffff:", 8) == 0 && strchr(s, '.') != NULL &&
		    strchr(s, ']') != NULL)
			snprintf(n[i], sizeof n[i], "%.*s%s",
			    (int)(strchr(s, ']') - s - 8), s + 8,
			    strchr(s, ']') + 1);
		else
			snprintf(n[i], sizeof n[i], "%s", s);
	}
	snprintf(buf, len, "inet %s %s %s", json_string_value(
	    json_object_get(f, "protocol")), n[swapped], n[!swapped]);
	return buf;
}

/*
 * The "PID:FD" of the socket of inode ino in inos, that of process p
 * where it has one (a descriptor that a fork copied is in both), or
 * NULL.
 */
static json_t *
sock_end(json_t *inos, const char *ino, json_t *p)
{
	json_t	*a = json_object_get(inos, ino), *e;
	size_t	 i;

	json_array_foreach(a, i, e)
		if (json_equal(json_object_get(e, "pid"),
		    json_object_get(p, "pid")))
			return json_object_get(e, "end");
	return json_object_get(json_array_get(a, 0), "end");
}

/*
 * Collects the ends: inos, each unix socket's ends by its inode, and
 * each connected inet socket's by its addresses (inet_end()); pipes,
 * each pipe's ends ({"end": "PID:FD", "mode": ...}) by its id.
 */
static int
ends_collect(json_t *procs, json_t *inos, json_t *pipes)
{
	json_t	*p, *f;
	char	 key[KEY_LEN];
	size_t	 i, j;

	json_array_foreach(procs, i, p) {
		json_array_foreach(json_object_get(p, "fds"), j, f) {
			if (json_is_integer(json_object_get(f, "ino")) &&
			    add_end(inos, num_key(f, "ino", key, sizeof key),
			    json_pack("{s:o, s:O}", "end", end_name(p, f),
			    "pid", json_object_get(p, "pid"))) != 0)
				return -1;
			if (inet_end(f, 0, key, sizeof key) != NULL &&
			    add_end(inos, key, json_pack("{s:o, s:O}", "end",
			    end_name(p, f), "pid", json_object_get(p,
			    "pid"))) != 0)
				return -1;
			if (!json_is_integer(json_object_get(f, "pipe_id")))
				continue;
			num_key(f, "pipe_id", key, sizeof key);
			if (add_end(pipes, key, json_pack("{s:o, s:O}", "end",
			    end_name(p, f), "mode", json_object_get(f,
			    "mode"))) != 0)
				return -1;
		}
	}
	return 0;
}

/*
 * Ties the ends together: each unix or inet socket's "peer" ("PID:FD"
 * of the socket at its other end, "external" when that is not in the
 * tree, null when it has none), each pipe end's "peers" (its other
 * ends).
 */
static int
ends_link(json_t *procs, json_t *inos, json_t *pipes)
{
	json_t	*p, *f, *a, *e, *v, *peer;
	char	 key[KEY_LEN];
	size_t	 i, j, k;

	json_array_foreach(procs, i, p) {
		json_array_foreach(json_object_get(p, "fds"), j, f) {
			if (strcmp(json_string_value(json_object_get(f,
			    "type")), "inet") == 0) {
				if (inet_end(f, 1, key, sizeof key) == NULL)
					peer = json_null();
				else if ((v = sock_end(inos, key, p)) != NULL)
					peer = json_incref(v);
				else
					peer = json_string("external");
				if (json_object_set_new(f, "peer", peer) != 0)
					return -1;
			}
			if (json_is_integer(json_object_get(f, "ino"))) {
				if (!json_is_integer(json_object_get(f,
				    "peer_ino")))
					peer = json_null();
				else if ((v = sock_end(inos, num_key(f,
				    "peer_ino", key, sizeof key), p)) != NULL)
					peer = json_incref(v);
				else
					peer = json_string("external");
				if (json_object_set_new(f, "peer", peer) != 0)
					return -1;
			}
			if (!json_is_integer(json_object_get(f, "pipe_id")))
				continue;
			if ((a = json_array()) == NULL ||
			    json_object_set_new(f, "peers", a) != 0 ||
			    (e = end_name(p, f)) == NULL)
				return -1;
			json_array_foreach(json_object_get(pipes, num_key(f,
			    "pipe_id", key, sizeof key)), k, v)
				if (!json_equal(json_object_get(v, "end"), e))
					json_array_append(a, json_object_get(v,
					    "end"));
			json_decref(e);
		}
	}
	return 0;
}

/*
 * The pipes, as a list: [{"pipe_id": N, "ends": [...]}], in the order
 * of the first end of each in procs.
 */
static json_t *
pipes_list(json_t *procs, json_t *pipes)
{
	json_t	*a, *p, *f, *done;
	char	 key[32];
	size_t	 i, j;

	if ((a = json_array()) == NULL || (done = json_object()) == NULL) {
		json_decref(a);
		return NULL;
	}
	json_array_foreach(procs, i, p)
		json_array_foreach(json_object_get(p, "fds"), j, f) {
			if (!json_is_integer(json_object_get(f, "pipe_id")) ||
			    json_object_get(done, num_key(f, "pipe_id", key,
			    sizeof key)) != NULL)
				continue;
			if (json_object_set_new(done, key, json_true()) != 0 ||
			    json_array_append_new(a, json_pack("{s:O, s:O}",
			    "pipe_id", json_object_get(f, "pipe_id"), "ends",
			    json_object_get(pipes, key))) != 0) {
				json_decref(a);
				a = NULL;
				goto out;
			}
		}
out:
	json_decref(done);
	return a;
}

/* "directory", "regular", "device" or "other", as st_mode m says. */
static const char *
kind(uint32_t m)
{
	return S_ISDIR(m) ? "directory" : S_ISREG(m) ? "regular" :
	    S_ISCHR(m) || S_ISBLK(m) ? "device" : "other";
}

/* The ids of the files that descriptors of procs name, as keys. */
static json_t *
fd_ids(json_t *procs)
{
	json_t	*p, *f, *ids;
	char	 key[32];
	size_t	 i, j;

	if ((ids = json_object()) == NULL)
		return NULL;
	json_array_foreach(procs, i, p)
		json_array_foreach(json_object_get(p, "fds"), j, f)
			if (json_is_string(json_object_get(f, "path")) &&
			    json_object_set_new(ids, num_key(f, "id", key,
			    sizeof key), json_true()) != 0) {
				json_decref(ids);
				return NULL;
			}
	return ids;
}

/*
 * Every file of files.img that criu opens on restore: those that
 * descriptors name, those that mappings name (and the executables), the
 * working and root directories.  A file must exist at its path unless it
 * travels in the image (ghost); a regular one with the size it had.
 */
static json_t *
files_doc(const struct gck_needs *nd, json_t *procs)
{
	const RegFileEntry	*re;
	json_t			*a, *o, *ids;
	char			 key[32];
	size_t			 i;
	int			 gh, byfd, abs;

	if ((ids = fd_ids(procs)) == NULL)
		return NULL;
	if ((a = json_array()) == NULL)
		goto out;
	for (i = 0; i < nd->nfe; i++) {
		if (nd->fe[i]->type != FD_REG || (re = nd->fe[i]->reg) ==
		    NULL || re->name == NULL)
			continue;
		gh = ghost(nd, re->id);
		abs = !gh && re->name[0] == '/';
		snprintf(key, sizeof key, "%" PRIu32, re->id);
		byfd = json_object_get(ids, key) != NULL;
		o = json_pack("{s:o, s:o, s:s?, s:b, s:b, s:b, s:b, s:b}",
		    "path", gck_needs_jstr(re->name, strlen(re->name)), "size",
		    re->has_size ? json_integer((json_int_t)re->size) :
		    json_null(), "kind", re->has_mode ? kind(re->mode) : NULL,
		    "ghost", gh, "must_exist", abs, "same_size", abs &&
		    re->has_size && re->has_mode && S_ISREG(re->mode),
		    "by_fd", byfd,
		    "mapped", !byfd && !(re->has_mode && S_ISDIR(re->mode)));
		if (o == NULL || json_array_append_new(a, o) != 0) {
			json_decref(a);
			a = NULL;
			break;
		}
	}
out:
	json_decref(ids);
	return a;
}

static int
in_array(json_t *a, json_t *v)
{
	json_t	*x;
	size_t	 i;

	json_array_foreach(a, i, x)
		if (json_equal(x, v))
			return 1;
	return 0;
}

/*
 * What inventory.img says of the criu that dumped the tree: CRIU's ids
 * of its mount and network namespaces (-1 where not known), and whether
 * it dumped the TCP connections to be restored closed (--tcp-close).
 */
static void
root_ids(const struct gck_needs *nd, int64_t *mntp, int64_t *netp,
    int *closep)
{
	const struct nfile	*f;
	InventoryEntry		*ie = NULL;
	const uint8_t		*rec;
	uint32_t		 len, m[1];
	size_t			 pos = sizeof m;
	int			 bad;

	*mntp = *netp = -1;
	*closep = 0;
	if ((f = nfind(nd, "inventory.img")) == NULL || f->len < sizeof m ||
	    (memcpy(m, f->data, sizeof m), m[0] != INVENTORY_MAGIC) ||
	    (rec = gck_img_record(f->data, f->len, &pos, &len, &bad)) ==
	    NULL || (ie = inventory_entry__unpack(NULL, len, rec)) == NULL)
		return;
	if (ie->root_ids != NULL && ie->root_ids->has_mnt_ns_id)
		*mntp = ie->root_ids->mnt_ns_id;
	if (ie->root_ids != NULL && ie->root_ids->has_net_ns_id)
		*netp = ie->root_ids->net_ns_id;
	*closep = ie->has_tcp_close && ie->tcp_close;
	inventory_entry__free_unpacked(ie, NULL);
}

/*
 * Whether the tree has a mount namespace of its own, as far as the
 * image tells: one of its processes in another than the criu that
 * dumped it.
 */
static json_t *
mnt_doc(const struct gck_needs *nd, json_t *procs)
{
	json_t			*ids, *p, *v, *own;
	size_t			 i;
	int			 known = 1, closed;
	int64_t			 crit, net;

	root_ids(nd, &crit, &net, &closed);
	if ((ids = json_array()) == NULL)
		return NULL;
	own = json_false();
	json_array_foreach(procs, i, p) {
		v = json_object_get(p, "mnt_ns_id");
		if (!json_is_integer(v)) {
			known = 0;
			continue;
		}
		if (json_integer_value(v) != crit)
			own = json_true();
		if (!in_array(ids, v))
			json_array_append(ids, v);
	}
	if (crit < 0 || !known)
		own = json_null();
	return json_pack("{s:o, s:o, s:o}", "own", own, "mnt_ns_ids", ids,
	    "criu_mnt_ns_id", crit >= 0 ? json_integer(crit) : json_null());
}

/* The totals: descriptors on files, on sockets; pipes; mapped files. */
static json_t *
totals(json_t *procs, json_t *pipes, json_t *files)
{
	json_t		*p, *f;
	const char	*t;
	size_t		 i, j;
	json_int_t	 nf = 0, ns = 0, nm = 0;

	json_array_foreach(procs, i, p)
		json_array_foreach(json_object_get(p, "fds"), j, f) {
			t = json_string_value(json_object_get(f, "type"));
			if (strcmp(t, "file") == 0)
				nf++;
			else if (strcmp(t, "unix") == 0 ||
			    strcmp(t, "inet") == 0 || strcmp(t, "packet") ==
			    0 || strcmp(t, "netlink") == 0)
				ns++;
		}
	json_array_foreach(files, i, f)
		if (json_is_true(json_object_get(f, "mapped")))
			nm++;
	return json_pack("{s:I, s:I, s:I, s:I}", "files", nf, "sockets", ns,
	    "pipes", (json_int_t)json_array_size(pipes), "mapped_files", nm);
}

/* The processes of pstree.img, each described. */
static json_t *
procs_doc(const struct gck_needs *nd)
{
	const struct nfile	*f;
	const uint8_t		*rec;
	PstreeEntry		*pe;
	json_t			*a, *o;
	size_t			 pos;
	uint32_t		 len;
	int			 bad = 0;

	if ((f = nfind(nd, "pstree.img")) == NULL ||
	    gck_img_start(f->data, f->len, PSTREE_MAGIC, &pos) == -1 ||
	    (a = json_array()) == NULL)
		return NULL;
	while ((rec = gck_img_record(f->data, f->len, &pos, &len, &bad)) !=
	    NULL) {
		if ((pe = pstree_entry__unpack(NULL, len, rec)) == NULL)
			break;
		o = proc_doc(nd, pe->pid);
		pstree_entry__free_unpacked(pe, NULL);
		if (o == NULL || json_array_append_new(a, o) != 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/*
 * The "descriptors" member of gpuinspect's document, from what nd kept;
 * NULL if the image does not list its processes (or out of memory).
 */
json_t *
gck_needs_doc(const struct gck_needs *nd)
{
	json_t	*procs, *inos = NULL, *pipes = NULL, *files = NULL;
	json_t	*d = NULL, *pl = NULL;

	if ((procs = procs_doc(nd)) == NULL)
		return NULL;
	if ((inos = json_object()) == NULL || (pipes = json_object()) ==
	    NULL || ends_collect(procs, inos, pipes) != 0 ||
	    ends_link(procs, inos, pipes) != 0 ||
	    (pl = pipes_list(procs, pipes)) == NULL ||
	    (files = files_doc(nd, procs)) == NULL)
		goto out;
	d = json_pack("{s:O, s:O, s:O, s:o, s:o}", "processes", procs,
	    "files", files, "pipes", pl, "mount_namespace", mnt_doc(nd, procs),
	    "totals", totals(procs, pl, files));
out:
	json_decref(procs);
	json_decref(inos);
	json_decref(pipes);
	json_decref(files);
	json_decref(pl);
	return d;
}

/* Check: findings. */

/* Adds a finding to fl: sev "fail" or "note", about what. */
static void
finding(json_t *fl, const char *sev, const char *what, const char *fmt, ...)
{
	va_list	 ap;
	char	*s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		s = NULL;
	va_end(ap);
	json_array_append_new(fl, json_pack("{s:s, s:s, s:s}", "severity",
	    sev, "what", what, "message", s != NULL ? s : "out of memory"));
	free(s);
}

/*
 * criu here, and of a version that reads what the image's criu
 * dumped.
 */
static void
check_criu(struct gck_ctx *ctx, const struct gck_manifest *m, json_t *fl)
{
	char	have[64];

	if (gck_criu_can_read(ctx, gck_manifest_criu_version(m), have,
	    sizeof have) != GCK_OK)
		finding(fl, "fail", "criu", "%s", gck_error_string(ctx));
}

/* The files that must be there, at the size they had. */
static void
check_files(json_t *d, json_t *fl)
{
	struct stat	 sb;
	const char	*path;
	json_t		*f;
	size_t		 i;

	json_array_foreach(json_object_get(d, "files"), i, f) {
		path = json_string_value(json_object_get(f, "path"));
		if (!json_is_true(json_object_get(f, "must_exist")) ||
		    (!json_is_true(json_object_get(f, "by_fd")) &&
		    strcmp(json_string_value(json_object_get(f, "kind")) ?
		    json_string_value(json_object_get(f, "kind")) : "",
		    "directory") == 0))
			continue;
		if (stat(path, &sb) == -1) {
			finding(fl, "fail", "file", "file '%s' is missing "
			    "here: %s", path, strerror(errno));
			continue;
		}
		if (json_is_true(json_object_get(f, "same_size")) &&
		    (json_int_t)sb.st_size != json_integer_value(
		    json_object_get(f, "size")))
			finding(fl, "fail", "file", "file '%s' is %lld bytes "
			    "here, %lld in the image: criu restores only a "
			    "file of the size it had", path,
			    (long long)sb.st_size,
			    (long long)json_integer_value(json_object_get(f,
			    "size")));
	}
}

/* Directory what ("working", "root") of process p, which must be here. */
static void
check_dir(json_t *p, const char *k, const char *what, json_t *fl)
{
	struct stat	 sb;
	const char	*path = json_string_value(json_object_get(p, k));

	if (path == NULL)
		return;
	if (stat(path, &sb) == -1)
		finding(fl, "fail", k, "%s directory '%s' of process %lld is "
		    "missing here: %s", what, path, (long long)
		    json_integer_value(json_object_get(p, "pid")),
		    strerror(errno));
	else if (!S_ISDIR(sb.st_mode))
		finding(fl, "fail", k, "%s directory '%s' of process %lld is "
		    "not a directory here", what, path, (long long)
		    json_integer_value(json_object_get(p, "pid")));
}

/* Listening unix sockets bound to a path: its directory must be here. */
static void
check_socket(json_t *p, json_t *f, json_t *fl)
{
	struct stat	 sb;
	const char	*a = json_string_value(json_object_get(f, "address"));
	const char	*sl;
	char		 dir[PATH_MAX];

	if (a == NULL || json_is_true(json_object_get(f, "abstract")) ||
	    strcmp(json_string_value(json_object_get(f, "state")),
	    "listening") != 0 || (sl = strrchr(a, '/')) == NULL)
		return;
	snprintf(dir, sizeof dir, "%.*s", sl == a ? 1 : (int)(sl - a), a);
	if (stat(dir, &sb) == -1 || !S_ISDIR(sb.st_mode))
		finding(fl, "fail", "socket", "unix socket '%s' of process "
		    "%lld (fd %lld, listening) needs directory '%s', which "
		    "is missing here", a, (long long)json_integer_value(
		    json_object_get(p, "pid")), (long long)json_integer_value(
		    json_object_get(f, "fd")), dir);
}

/*
 * A tree of a mount namespace of its own: what it had from its host,
 * which must be here (or named to gpurestore where it is).
 */
static void
check_mounts(const struct gck_manifest *m, json_t *fl)
{
	struct stat	 sb;
	json_t		*mo = json_object_get(gck_manifest_json(m), "mounts");
	json_t		*e;
	const char	*path;
	size_t		 i;

	if (!json_is_object(mo))
		return;
	path = json_string_value(json_object_get(mo, "root"));
	if (path != NULL && (stat(path, &sb) == -1 || !S_ISDIR(sb.st_mode)))
		finding(fl, "fail", "mount", "the root file system '%s' of "
		    "the tree's mount namespace is missing here (gpurestore "
		    "--root DIR says where it is)", path);
	json_array_foreach(json_object_get(mo, "binds"), i, e) {
		path = json_string_value(json_object_get(e, "source"));
		if (path != NULL && stat(path, &sb) == -1)
			finding(fl, "fail", "mount", "'%s', mounted at '%s' "
			    "in the tree's mount namespace, is missing here "
			    "(gpurestore --mount-map %s=DIR says where it is)",
			    path, json_string_value(json_object_get(e, "at")),
			    json_string_value(json_object_get(e, "at")));
	}
	json_array_foreach(json_object_get(mo, "files"), i, e) {
		path = json_string_value(json_object_get(e, "path"));
		if (path != NULL && stat(path, &sb) == -1)
			finding(fl, "fail", "mount", "file '%s', open on fd "
			    "%lld of process %lld outside its mount namespace, "
			    "is missing here", path, (long long)
			    json_integer_value(json_object_get(e, "fd")),
			    (long long)json_integer_value(json_object_get(e,
			    "pid")));
	}
	finding(fl, "note", "mount", "gpurestore takes the sources of the "
	    "tree's mounts from the image only when it is signed by a key "
	    "that allowed_signers allows; else give them with --root and "
	    "--mount-map");
}

/* What the processes need of this host's file system. */
static void
check_paths(json_t *d, json_t *fl)
{
	json_t	*p, *f;
	size_t	 i, j;

	if (d == NULL) {
		finding(fl, "note", "files", "the image does not list its "
		    "processes' files: they are not checked");
		return;
	}
	if (json_is_true(json_object_get(json_object_get(d,
	    "mount_namespace"), "own"))) {
		finding(fl, "note", "files", "the tree has a mount namespace "
		    "of its own: the paths it needs are not checked here");
		return;
	}
	check_files(d, fl);
	json_array_foreach(json_object_get(d, "processes"), i, p) {
		check_dir(p, "cwd", "working", fl);
		check_dir(p, "root", "root", fl);
		json_array_foreach(json_object_get(p, "fds"), j, f)
			if (json_is_string(json_object_get(f, "state")))
				check_socket(p, f, fl);
	}
}

/*
 * The descriptors on a file, a unix socket or a pipe that files.img
 * lacks (no such file there, of that kind, with its record), which criu
 * restore refuses: their members are missing from the document (those
 * on an inet socket check_inet() says).
 */
static void
check_fds(json_t *d, json_t *fl)
{
	static const struct {
		const char	*type, *member, *what;
	} k[] = {
		{ "file", "path", "a file" },
		{ "unix", "socket_type", "a unix socket" },
		{ "pipe", "pipe_id", "a pipe" },
	};
	json_t	*p, *f;
	size_t	 i, j, n;

	json_array_foreach(json_object_get(d, "processes"), i, p)
		json_array_foreach(json_object_get(p, "fds"), j, f)
			for (n = 0; n < sizeof k / sizeof k[0]; n++)
				if (strcmp(json_string_value(json_object_get(f,
				    "type")), k[n].type) == 0 &&
				    json_object_get(f, k[n].member) == NULL)
					finding(fl, "fail", "file", "corrupt "
					    "image: fd %lld of process %lld is "
					    "%s (id %lld) that 'files.img' "
					    "lacks", (long long)
					    json_integer_value(json_object_get(
					    f, "fd")), (long long)
					    json_integer_value(json_object_get(
					    p, "pid")), k[n].what, (long long)
					    json_integer_value(json_object_get(
					    f, "id")));
}

/*
 * The image's PIDs that are taken here: by its own source, still here,
 * which gpurestore cannot restore beside unless asked (--pidns); by
 * another process, which makes gpurestore restore the tree in a PID
 * namespace of its own.
 */
static void
check_pids(const struct gck_manifest *m, json_t *fl)
{
	char	comm[64], st;
	size_t	i;
	pid_t	pid;
	int	boot = gck_manifest_this_boot(m);

	for (i = 0; i < gck_manifest_nprocs(m); i++) {
		pid = gck_manifest_pid(m, i);
		/* The check itself is gone by the time of a restore. */
		if (pid == getpid() || (st = gck_pid_state(pid)) == 0)
			continue;
		if (gck_pid_comm(pid, comm, sizeof comm) == -1)
			snprintf(comm, sizeof comm, "?");
		/* (the source's zombies go once they are reaped) */
		if (boot && st != 'Z' && gck_manifest_proc_here(m, i))
			finding(fl, "fail", "pid", "pid %d is in use on this "
			    "host by the image's source, process tree %d, "
			    "still here: end it, or restore a copy beside it "
			    "with gpurestore --pidns", (int)pid,
			    (int)gck_manifest_root_pid(m));
		else
			finding(fl, "note", "pid", "pid %d of the image is in "
			    "use on this host (by '%s'): gpurestore restores "
			    "the tree in a PID namespace of its own, where it "
			    "keeps its PIDs", (int)pid, comm);
	}
}

/*
 * A socket that a restore here cannot take: with fl, a finding "fail"
 * about what on it (GCK_OK); without, the message on ctx, "cannot
 * restore: " before it but for a corrupt image (returns code).
 */
static int
problem(struct gck_ctx *ctx, json_t *fl, int code, const char *what,
    const char *fmt, ...)
{
	va_list	 ap;
	char	*s;
	int	 r = GCK_OK;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		s = NULL;
	va_end(ap);
	if (fl != NULL)
		finding(fl, "fail", what, "%s", s != NULL ? s :
		    "out of memory");
	else if (s == NULL)
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	else
		r = gck_set_error(ctx, code, "%s%s", code == GCK_EFORMAT ? "" :
		    "cannot restore: ", s);
	free(s);
	return r;
}

/* Whether pid is a process of the image's source, still here (m: or NULL). */
static int
source_holds(const struct gck_manifest *m, pid_t pid)
{
	size_t	i;

	if (m == NULL || !gck_manifest_this_boot(m))
		return 0;
	for (i = 0; i < gck_manifest_nprocs(m); i++)
		if (gck_manifest_host_pid(m, i) == pid &&
		    gck_manifest_proc_here(m, i))
			return 1;
	return 0;
}

/*
 * Inet socket in of the image's process pid, as criu restore would take
 * it here: bound to its port, which must be free, at its address, which
 * must be here; a TCP connection, bound to its address, unless c says
 * the connections are restored closed.  Returns as problem() does.
 */
static int
inet_fd(struct icheck *c, const struct gck_inet *in, uint32_t pid)
{
	char		 a[GCK_INET_ADDRLEN], b[GCK_INET_ADDRLEN];
	char		 h[GCK_INET_ADDRLEN], comm[64];
	const char	*verb, *pn = gck_inet_proto_name(in);
	pid_t		 holder;
	int		 e, closed;

	verb = strcmp(gck_inet_state(in), "listening") == 0 ? "listens on" :
	    "is bound to";
	gck_inet_addr(in, 0, 1, a, sizeof a);
	gck_inet_addr(in, 0, 0, h, sizeof h);
	if (gck_inet_bound(in)) {
		e = gck_inet_try_bind(in, 0);
		if (e == EADDRNOTAVAIL)
			return problem(c->ctx, c->fl, GCK_EINVAL, "address",
			    "the image's process %" PRIu32 " %s %s %s, and "
			    "this host lacks the address %s", pid, verb, pn, a,
			    h);
		if (e == EADDRINUSE) {
			if (c->host == NULL)
				c->host = gck_inet_host_new();
			holder = gck_inet_holder(c->host, in, &closed);
			if (holder <= 0 && closed)
				return problem(c->ctx, c->fl, GCK_EBUSY,
				    "port", "the image's process %" PRIu32
				    " %s %s %s, which a closed connection "
				    "still holds on this host (for a minute at "
				    "most)", pid, verb, pn, a);
			if (holder <= 0 || gck_pid_comm(holder, comm,
			    sizeof comm) == -1)
				return problem(c->ctx, c->fl, GCK_EBUSY,
				    "port", "the image's process %" PRIu32
				    " %s %s %s, which is in use on this host",
				    pid, verb, pn, a);
			if (source_holds(c->m, holder))
				return problem(c->ctx, c->fl, GCK_EBUSY,
				    "port", "the image's process %" PRIu32
				    " %s %s %s, which the image's source, "
				    "process %d ('%s'), still holds on this "
				    "host", pid, verb, pn, a, (int)holder,
				    comm);
			return problem(c->ctx, c->fl, GCK_EBUSY, "port",
			    "the image's process %" PRIu32 " %s %s %s, which "
			    "process %d ('%s') holds on this host", pid, verb,
			    pn, a, (int)holder, comm);
		}
	}
	if (gck_inet_connection(in) && !c->tcp_close &&
	    gck_inet_try_bind(in, 1) == EADDRNOTAVAIL) {
		gck_inet_addr(in, 1, 1, b, sizeof b);
		return problem(c->ctx, c->fl, GCK_EINVAL, "address", "process "
		    "%" PRIu32 "'s TCP connection %s -> %s needs the address "
		    "%s, which this host lacks: restore with %s--tcp-close to "
		    "have it closed (its process sees the connection reset)",
		    pid, a, b, h, c->fl != NULL ? "gpurestore " : "");
	}
	return GCK_OK;
}

/*
 * The inet sockets of process pid's descriptors, each not seen yet (a
 * socket that a fork shared is checked once), checked with inet_fd(),
 * but for those in a network namespace other than criu's, which c->own
 * then says.  Returns as problem() does.
 */
static int
proc_inet(struct icheck *c, uint32_t pid)
{
	const struct nfile	*f;
	const FileEntry		*fe;
	TaskKobjIdsEntry	*ids;
	FdinfoEntry		*fi;
	struct gck_inet		 in;
	const uint8_t		*rec;
	char			 name[64], key[16];
	size_t			 pos;
	uint32_t		 len;
	int			 bad = 0, r = GCK_OK;

	snprintf(name, sizeof name, "ids-%" PRIu32 ".img", pid);
	if ((rec = first(c->nd, name, IDS_MAGIC, &len)) == NULL ||
	    (ids = task_kobj_ids_entry__unpack(NULL, len, rec)) == NULL)
		return GCK_OK;
	snprintf(name, sizeof name, "fdinfo-%" PRIu32 ".img", ids->files_id);
	if (!ids->has_files_id || (f = nfind(c->nd, name)) == NULL ||
	    gck_img_start(f->data, f->len, FDINFO_MAGIC, &pos) == -1)
		goto out;
	while (r == GCK_OK && (rec = gck_img_record(f->data, f->len, &pos,
	    &len, &bad)) != NULL) {
		if ((fi = fdinfo_entry__unpack(NULL, len, rec)) == NULL)
			break;
		snprintf(key, sizeof key, "%" PRIu32, fi->id);
		if (fi->type != FD_INETSK || json_object_get(c->seen, key) !=
		    NULL || json_object_set_new(c->seen, key, json_true()) !=
		    0)
			;
		else if ((fe = file_of(c->nd, fi->id, FD_INETSK)) == NULL)
			r = problem(c->ctx, c->fl, GCK_EFORMAT, "socket",
			    "corrupt image: fd %" PRIu32 " of process %" PRIu32
			    " is an inet socket (id %" PRIu32 ") that "
			    "'files.img' lacks", fi->fd, pid, fi->id);
		else if (gck_inet_read(fe->isk, &in) == -1)
			r = problem(c->ctx, c->fl, GCK_EFORMAT, "socket",
			    "corrupt image: the inet socket of fd %" PRIu32
			    " of process %" PRIu32 " records %s", fi->fd, pid,
			    in.bad);
		else if (c->netns >= 0 && (in.has_ns ? in.ns_id != c->netns :
		    ids->has_net_ns_id && ids->net_ns_id != c->netns))
			c->own = 1;
		else
			r = inet_fd(c, &in, pid);
		fdinfo_entry__free_unpacked(fi, NULL);
	}
out:
	task_kobj_ids_entry__free_unpacked(ids, NULL);
	return r;
}

/*
 * The inet sockets that the descriptors of the processes of pstree.img
 * name, as criu restore would take them here (proc_inet(); tcp_close:
 * the TCP connections are to be restored closed): with fl, each that it
 * cannot a finding; without, the first the message on ctx.  Returns
 * GCK_OK or a code.
 */
static int
check_inet(struct gck_ctx *ctx, const struct gck_needs *nd,
    const struct gck_manifest *m, int tcp_close, json_t *fl)
{
	const struct nfile	*f;
	struct icheck		 c;
	const uint8_t		*rec;
	PstreeEntry		*pe;
	size_t			 pos;
	uint32_t		 len;
	int64_t			 mnt;
	int			 bad = 0, closed, r = GCK_OK;

	if ((f = nfind(nd, "pstree.img")) == NULL ||
	    gck_img_start(f->data, f->len, PSTREE_MAGIC, &pos) == -1)
		return GCK_OK;
	memset(&c, 0, sizeof c);
	c.ctx = ctx;
	c.nd = nd;
	c.m = m;
	c.fl = fl;
	root_ids(nd, &mnt, &c.netns, &closed);
	c.tcp_close = tcp_close || closed;
	if ((c.seen = json_object()) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	while (r == GCK_OK && (rec = gck_img_record(f->data, f->len, &pos,
	    &len, &bad)) != NULL) {
		if ((pe = pstree_entry__unpack(NULL, len, rec)) == NULL)
			break;
		r = proc_inet(&c, pe->pid);
		pstree_entry__free_unpacked(pe, NULL);
	}
	if (r == GCK_OK && c.own && fl != NULL)
		finding(fl, "note", "socket", "the tree has a network "
		    "namespace of its own: its sockets are not checked here");
	json_decref(c.seen);
	gck_inet_host_free(c.host);
	return r;
}

/*
 * The GPUs: a driver here new enough, and for each of the image's GPUs
 * one of the same chip with room enough, as gpurestore would map them.
 */
static void
check_gpus(struct gck_ctx *ctx, const struct gck_manifest *m, json_t *fl)
{
	const struct gck_mcuda	*mc = gck_manifest_cuda(m);
	struct gck_cuda		*cu = NULL;
	struct gck_gpu		*host = NULL;
	char			 here[32], img[32];
	int			 dst[GCK_GPUS_MAX], remap = 0;
	size_t			 nhost = 0, g;

	if (mc == NULL || mc->nprocs == 0)
		return;
	if (gck_cuda_open(ctx, &cu) != GCK_OK) {
		finding(fl, "fail", "gpu", "the image's process %d ('%s') uses "
		    "CUDA, but %s", (int)mc->procs[0].pid, mc->procs[0].comm,
		    gck_error_string(ctx));
		goto out;
	}
	if (gck_cuda_init(ctx, cu) != GCK_OK ||
	    gck_cuda_devices(ctx, cu, 1, &host, &nhost) != GCK_OK) {
		finding(fl, "fail", "gpu", "the image's process %d ('%s') uses "
		    "CUDA, but %s", (int)mc->procs[0].pid, mc->procs[0].comm,
		    gck_error_string(ctx));
		goto out;
	}
	gck_cuda_version_string(gck_cuda_version(cu), here, sizeof here);
	gck_cuda_version_string(mc->driver_version, img, sizeof img);
	if (gck_cuda_version(cu) < GCK_CUDA_CKPT_VERSION)
		finding(fl, "fail", "driver", "the CUDA driver here (%s) "
		    "cannot restore GPU state: NVIDIA driver r570 (CUDA 12.8) "
		    "or newer is needed", here);
	else if (gck_cuda_version(cu) < mc->driver_version)
		finding(fl, "fail", "driver", "the CUDA driver here (%s) is "
		    "older than the image's (%s)", here, img);
	if (mc->job_holder > 0 && gck_cuda_version(cu) >=
	    GCK_CUDA_CKPT_VERSION && gck_cuda_version(cu) < GCK_CUDA_JOB_VERSION)
		finding(fl, "fail", "driver", "the image's CUDA processes are "
		    "one job (gpuckpt --launch), which needs NVIDIA driver "
		    "r590 (CUDA 13.1) or newer; the CUDA driver here is %s",
		    here);
	if (gck_gpumap_plan(ctx, mc, host, nhost, NULL, dst, &remap) !=
	    GCK_OK) {
		finding(fl, "fail", "gpu", "%s", gck_error_string(ctx));
		goto out;
	}
	for (g = 0; remap && g < mc->ngpus; g++) {
		if (memcmp(mc->gpus[g].uuid, host[dst[g]].uuid, 16) == 0)
			continue;
		if (gck_cuda_version(cu) < GCK_CUDA_REMAP_VERSION)
			finding(fl, "fail", "gpu", "GPU %s of the image is not "
			    "here: it must be remapped (to %s), which needs "
			    "NVIDIA driver r580 (CUDA 13.0) or newer; this "
			    "driver is %s", mc->gpus[g].uuidstr,
			    host[dst[g]].uuidstr, here);
		else
			finding(fl, "note", "gpu", "GPU %s (%s) of the image "
			    "is not here: gpurestore restores its processes' "
			    "state on %s", mc->gpus[g].uuidstr,
			    mc->gpus[g].name, host[dst[g]].uuidstr);
	}
out:
	free(host);
	gck_cuda_close(cu);
}

int
gck_inspect_check(struct gck_ctx *ctx, int fd, char **textp, int *failp)
{
	const struct gck_manifest	*m;
	struct gck_reader		*rd = NULL;
	struct gck_needs		*nd = NULL;
	json_t				*fl = NULL, *d = NULL, *doc = NULL, *f;
	size_t				 i;
	int				 r, fail = 0;

	*textp = NULL;
	*failp = 0;
	if ((r = gck_reader_new(ctx, fd, &rd)) != GCK_OK)
		goto out;
	gck_reader_no_ahead(rd);
	if ((r = gck_reader_head(rd, &m)) != GCK_OK ||
	    (r = gck_needs_read(ctx, rd, m, &nd)) != GCK_OK)
		goto out;
	if ((fl = json_array()) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	d = gck_needs_doc(nd);
	check_criu(ctx, m, fl);
	check_paths(d, fl);
	check_mounts(m, fl);
	check_fds(d, fl);
	check_pids(m, fl);
	if ((r = check_inet(ctx, nd, m, 0, fl)) != GCK_OK)
		goto out;
	check_gpus(ctx, m, fl);
	json_array_foreach(fl, i, f)
		if (strcmp(json_string_value(json_object_get(f, "severity")),
		    "fail") == 0)
			fail = 1;
	doc = json_pack("{s:i, s:b, s:O}", "schema", GCK_INSPECT_SCHEMA,
	    "ok", !fail, "findings", fl);
	if ((r = gck_inspect_text(ctx, doc, textp)) == GCK_OK)
		*failp = fail;
out:
	json_decref(doc);
	json_decref(fl);
	json_decref(d);
	gck_needs_free(nd);
	gck_reader_free(rd);
	return r;
}

/*
 * Adds CRIU image name to nd, unless it has it: from the directory dfd,
 * or (dfd -1) borrowed from what srv holds.  Without that file, nothing
 * is added.  Returns GCK_OK or a code.
 */
static int
load(struct gck_ctx *ctx, struct gck_needs *nd, int dfd,
    const struct gck_serve *srv, const char *name)
{
	const struct gck_sfile	*sf = NULL;
	struct stat		 sb;
	struct nfile		*f;
	ssize_t			 n;
	int			 fd = -1, r;

	if (nfind(nd, name) != NULL)
		return GCK_OK;
	if (dfd == -1 && (srv == NULL || (sf = gck_serve_find(srv, name)) ==
	    NULL))
		return GCK_OK;
	if (dfd != -1 && (fd = openat(dfd, name, O_RDONLY | O_CLOEXEC |
	    O_NOFOLLOW)) == -1)
		return errno == ENOENT ? GCK_OK : gck_set_syserr(ctx, errno,
		    "cannot open '%s': %s", name, strerror(errno));
	if ((r = gck_grow(ctx, &nd->f, &nd->cap, nd->n, sizeof *nd->f)) !=
	    GCK_OK)
		goto out;
	f = &nd->f[nd->n];
	memset(f, 0, sizeof *f);
	if ((f->name = strdup(name)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	nd->n++;
	if (sf != NULL) {
		f->data = sf->data;
		f->len = sf->len;
		f->borrowed = 1;
		r = GCK_OK;
		goto out;
	}
	if (fstat(fd, &sb) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot read '%s': %s", name,
		    strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		r = gck_set_error(ctx, GCK_EUNSAFE, "cannot read '%s': not a "
		    "regular file", name);
		goto out;
	}
	if ((f->data = malloc((size_t)sb.st_size + 1)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((n = gck_read_full(ctx, fd, f->data, (size_t)sb.st_size,
	    name)) < 0) {
		r = gck_error_code(ctx);
		goto out;
	}
	f->len = (size_t)n;
	r = GCK_OK;
out:
	if (fd != -1)
		close(fd);
	return r;
}

/*
 * Adds to nd what names the processes' descriptors: pstree.img,
 * inventory.img, and each process's ids-PID.img and the fdinfo-N.img
 * that it names.  Returns GCK_OK or a code.
 */
static int
load_procs(struct gck_ctx *ctx, struct gck_needs *nd, int dfd,
    const struct gck_serve *srv)
{
	const struct nfile	*f;
	const uint8_t		*rec;
	PstreeEntry		*pe;
	TaskKobjIdsEntry	*ids;
	const char		*pst;
	char			 name[64];
	size_t			 pos, pstlen;
	uint32_t		 len, files_id;
	int			 bad = 0, has, r;

	if ((r = load(ctx, nd, dfd, srv, "inventory.img")) != GCK_OK ||
	    (r = load(ctx, nd, dfd, srv, "pstree.img")) != GCK_OK)
		return r;
	if ((f = nfind(nd, "pstree.img")) == NULL ||
	    gck_img_start(f->data, f->len, PSTREE_MAGIC, &pos) == -1)
		return GCK_OK;
	/* (its bytes stay where they are as nd grows) */
	pst = f->data;
	pstlen = f->len;
	while ((rec = gck_img_record(pst, pstlen, &pos, &len, &bad)) != NULL) {
		if ((pe = pstree_entry__unpack(NULL, len, rec)) == NULL)
			break;
		snprintf(name, sizeof name, "ids-%" PRIu32 ".img", pe->pid);
		pstree_entry__free_unpacked(pe, NULL);
		if ((r = load(ctx, nd, dfd, srv, name)) != GCK_OK)
			return r;
		if ((rec = first(nd, name, IDS_MAGIC, &len)) == NULL ||
		    (ids = task_kobj_ids_entry__unpack(NULL, len, rec)) ==
		    NULL)
			continue;
		has = ids->has_files_id;
		files_id = ids->files_id;
		task_kobj_ids_entry__free_unpacked(ids, NULL);
		snprintf(name, sizeof name, "fdinfo-%" PRIu32 ".img", files_id);
		if (has && (r = load(ctx, nd, dfd, srv, name)) != GCK_OK)
			return r;
	}
	return GCK_OK;
}

/*
 * Whether this host can take the inet sockets of the image, as criu
 * restore would (see check_inet()): the image's small CRIU files are in
 * the directory dfd, or (dfd -1) held by srv; m is its manifest (or
 * NULL), tcp_close whether its TCP connections are to be restored
 * closed.  Returns GCK_OK, or a code with a line that says what stands
 * in the way: a port taken here, an address this host lacks, a record
 * that lies.  An image without files.img passes untouched.
 */
int
gck_needs_restore_check(struct gck_ctx *ctx, int dfd,
    const struct gck_serve *srv, const struct gck_manifest *m, int tcp_close)
{
	struct gck_needs	*nd;
	int			 r;

	if ((nd = calloc(1, sizeof *nd)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if ((r = load(ctx, nd, dfd, srv, "files.img")) != GCK_OK ||
	    nfind(nd, "files.img") == NULL ||
	    (r = index_files(ctx, nd)) != GCK_OK ||
	    (r = load_procs(ctx, nd, dfd, srv)) != GCK_OK)
		goto out;
	r = gck_needs_sockets_check(ctx, nd, m, tcp_close);
out:
	gck_needs_free(nd);
	return r;
}

/*
 * The check of gck_needs_restore_check() on what nd holds.  Returns
 * GCK_OK or a code.
 */
int
gck_needs_sockets_check(struct gck_ctx *ctx, const struct gck_needs *nd,
    const struct gck_manifest *m, int tcp_close)
{
	return check_inet(ctx, nd, m, tcp_close, NULL);
}
