/*
 * frame.c: the framed exchange between gpusend and gpurecv.
 *
 * Every message is a 16-byte header, then len bytes: 'G', the type, two
 * zero bytes, len and seq, both big-endian.  Image bytes travel in data
 * frames numbered from 0; the other frames carry a small JSON object.
 */
#include "config.h"

#include <sys/types.h>

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>

#include "private.h"
#include "transport/frame.h"

static void
put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static uint32_t
get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

void
gck_frame_pack(unsigned char *hdr, int type, uint32_t len,
    uint64_t seq)
{
	hdr[0] = 'G';
	hdr[1] = (unsigned char)type;
	hdr[2] = hdr[3] = 0;
	put_be32(hdr + 4, len);
	put_be32(hdr + 8, (uint32_t)(seq >> 32));
	put_be32(hdr + 12, (uint32_t)seq);
}

/* Returns 1 if t is a frame type of this protocol. */
static int
known_type(int t)
{
	return t != 0 && strchr("HCQJODERGKBSXAP", t) != NULL;
}

/*
 * Checks the header read from `from' into *f.  Returns GCK_OK or
 * GCK_EFORMAT; the message quotes what came instead, so that a shell's
 * complaint on the remote's standard output reads as such.
 */
int
gck_frame_unpack(struct gck_ctx *ctx, const unsigned char *hdr,
    struct gck_frame *f, const char *from)
{
	char	text[GCK_FRAME_HDR + 1];
	size_t	i;

	f->type = hdr[1];
	f->len = get_be32(hdr + 4);
	f->seq = (uint64_t)get_be32(hdr + 8) << 32 | get_be32(hdr + 12);
	if (hdr[0] == 'G' && known_type(f->type) && hdr[2] == 0 &&
	    hdr[3] == 0 && f->len <= GCK_FRAME_MAX &&
	    (f->type == GCK_F_DATA || f->type == GCK_F_HAVE ||
	    f->type == GCK_F_PAGES ||
	    f->len <= GCK_CTL_MAX))
		return GCK_OK;
	for (i = 0; i < GCK_FRAME_HDR; i++)
		text[i] = hdr[i] >= 0x20 && hdr[i] < 0x7f ? (char)hdr[i] :
		    hdr[i] == '\n' ? ' ' : '?';
	text[i] = '\0';
	return gck_set_error(ctx, GCK_EFORMAT, "%s sent something that is "
	    "not gpuckpt's protocol: \"%s\"", from, text);
}

/*
 * Builds control frame seq of type, with the JSON object o.  Returns
 * the frame, header included, to be freed, its length in *lenp; NULL
 * when out of memory or too long.
 */
unsigned char *
gck_frame_obj(int type, uint64_t seq, size_t *lenp, const json_t *o)
{
	unsigned char	*buf;
	char		*text;
	size_t		 n;

	if ((text = json_dumps(o, JSON_COMPACT)) == NULL)
		return NULL;
	n = strlen(text);
	if (n > GCK_CTL_MAX || (buf = malloc(GCK_FRAME_HDR + n)) == NULL) {
		free(text);
		return NULL;
	}
	gck_frame_pack(buf, type, (uint32_t)n, seq);
	memcpy(buf + GCK_FRAME_HDR, text, n);
	free(text);
	*lenp = GCK_FRAME_HDR + n;
	return buf;
}

/* As gck_frame_obj(), the object made of fmt and ap (json_pack()). */
unsigned char *
gck_frame_vjson(int type, uint64_t seq, size_t *lenp, const char *fmt,
    va_list ap)
{
	unsigned char	*buf;
	json_t		*o;

	if ((o = json_vpack_ex(NULL, 0, fmt, ap)) == NULL)
		return NULL;
	buf = gck_frame_obj(type, seq, lenp, o);
	json_decref(o);
	return buf;
}

/*
 * Parses the payload of a control frame from `from' as a JSON object.
 * Returns it (to be json_decref'd) or NULL with the error set.
 */
json_t *
gck_frame_parse(struct gck_ctx *ctx, const char *buf, size_t len,
    const char *from)
{
	json_t	*o;

	if ((o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL)) == NULL ||
	    !json_is_object(o)) {
		json_decref(o);
		gck_set_error(ctx, GCK_EFORMAT, "%s sent a malformed message",
		    from);
		return NULL;
	}
	return o;
}

/*
 * Reads exactly len bytes from fd, waiting at most ms between bytes
 * (-1: for ever) and stopping when stopfd (or -1) becomes readable.
 * Returns GCK_OK, GCK_ETRUNC at end of file (*gotp says how much came),
 * GCK_ETIMEDOUT, GCK_EINTR or GCK_ESYS; only the last two set a message.
 */
int
gck_fd_read_wait(struct gck_ctx *ctx, int fd, void *buf, size_t len,
    int ms, int stopfd, size_t *gotp)
{
	struct pollfd	 pfd[2];
	char		*p = buf;
	size_t		 got = 0;
	ssize_t		 n;
	int		 k;

	if (gotp != NULL)
		*gotp = 0;
	while (got < len) {
		pfd[0].fd = fd;
		pfd[0].events = POLLIN;
		pfd[1].fd = stopfd;
		pfd[1].events = POLLIN;
		k = poll(pfd, stopfd != -1 ? 2 : 1, ms);
		if (k == -1 && errno == EINTR) {
			if (gck_check_interrupt(ctx) != GCK_OK)
				return GCK_EINTR;
			continue;
		}
		if (k == -1)
			return gck_set_syserr(ctx, errno, "poll: %s",
			    strerror(errno));
		if (k == 0)
			return GCK_ETIMEDOUT;
		if (stopfd != -1 && pfd[1].revents != 0)
			return GCK_EINTR;
		n = read(fd, p + got, len - got);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n == -1)
			return gck_set_syserr(ctx, errno, "cannot read: %s",
			    strerror(errno));
		if (n == 0)
			break;
		got += (size_t)n;
		if (gotp != NULL)
			*gotp = got;
	}
	return got == len ? GCK_OK : GCK_ETRUNC;
}

/* XXH3-128 of the first len bytes of fd, as 32 hex digits. */
int
gck_prefix_digest(struct gck_ctx *ctx, int fd, uint64_t len, char hex[33])
{
	XXH3_state_t	*st;
	XXH128_hash_t	 h;
	char		*buf;
	uint64_t	 off = 0;
	ssize_t		 n;
	int		 r = GCK_OK;

	if ((st = XXH3_createState()) == NULL ||
	    (buf = malloc(GCK_CHUNK)) == NULL) {
		XXH3_freeState(st);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	XXH3_128bits_reset(st);
	while (off < len) {
		n = pread(fd, buf, len - off < GCK_CHUNK ? (size_t)(len - off) :
		    GCK_CHUNK, (off_t)off);
		if (n <= 0) {
			r = gck_set_syserr(ctx, n == 0 ? EIO : errno, "cannot "
			    "read: %s", strerror(n == 0 ? EIO : errno));
			break;
		}
		XXH3_128bits_update(st, buf, (size_t)n);
		off += (uint64_t)n;
	}
	h = XXH3_128bits_digest(st);
	snprintf(hex, 33, "%016llx%016llx", (unsigned long long)h.high64,
	    (unsigned long long)h.low64);
	XXH3_freeState(st);
	free(buf);
	return r;
}
