#ifndef GCK_TRANSPORT_FRAME_H
#define GCK_TRANSPORT_FRAME_H

struct gck_ctx;
struct json_t;

/* frame.c: the framed exchange between gpusend and gpurecv */
#define GCK_PROTO		2
#define GCK_FRAME_HDR		16
#define GCK_CHUNK		(1u << 20)	/* image bytes per data frame */
#define GCK_FRAME_MAX		GCK_CHUNK
#define GCK_CTL_MAX		(64u << 10)	/* largest control frame */
#define GCK_KEEPALIVE_MS	5000		/* a busy gpurecv says so */
enum {
	GCK_F_HELLO = 'H',	/* recv: who it is, what it holds */
	GCK_F_HAVE = 'C',	/* recv: digests of chunks its cache has */
	GCK_F_PAGES = 'Q',	/* recv: and the digests of their pages */
	GCK_F_JOIN = 'J',	/* send: this connection is stream N */
	GCK_F_START = 'O',	/* send: the image follows, from offset */
	GCK_F_DATA = 'D',	/* send: image bytes, numbered */
	GCK_F_END = 'E',	/* send: no more, and how much in all */
	GCK_F_READY = 'R',	/* recv: restored, stopped, verified */
	GCK_F_GO = 'G',		/* send: let it run */
	GCK_F_RUNNING = 'K',	/* recv: it runs */
	GCK_F_BYE = 'B',	/* send: done, forget it */
	GCK_F_STORED = 'S',	/* recv: stored, verified, renamed */
	GCK_F_ERROR = 'X',	/* recv: failed, and why */
	GCK_F_ABORT = 'A',	/* send: given up */
	GCK_F_KEEPALIVE = 'P'	/* recv: still at work */
};
struct gck_frame {
	int		 type;
	uint32_t	 len;
	uint64_t	 seq;
};
void	gck_frame_pack(unsigned char *, int, uint32_t, uint64_t);
int	gck_frame_unpack(struct gck_ctx *, const unsigned char *,
	    struct gck_frame *, const char *);
unsigned char *gck_frame_vjson(int, uint64_t, size_t *, const char *,
	    va_list);
unsigned char *gck_frame_obj(int, uint64_t, size_t *, const struct json_t *);
struct json_t;
struct json_t *gck_frame_parse(struct gck_ctx *, const char *, size_t,
	    const char *);
int	gck_fd_read_wait(struct gck_ctx *, int, void *, size_t, int, int,
	    size_t *);
int	gck_prefix_digest(struct gck_ctx *, int, uint64_t, char [33]);

#endif /* GCK_TRANSPORT_FRAME_H */
