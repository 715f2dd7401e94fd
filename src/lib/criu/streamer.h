#ifndef GCK_CRIU_STREAMER_H
#define GCK_CRIU_STREAMER_H

struct XXH3_state_s;
struct gck_capture;
struct gck_criu_run;
struct gck_ctx;
struct gck_fill;
struct gck_manifest;
struct gck_parents;
struct gck_reader;
struct gck_serve;

/* streamer.c (capture), serve.c (serve): criu --stream's image socket */
#define GCK_SNAME	128
#define GCK_KEEP_MAX	(1024u << 20)	/* image data held in memory */
#define GCK_SAMPLE_STRIDE (64u << 10)	/* pages checked: the first ... */
#define GCK_SAMPLE_LEN	(4u << 10)	/* ... 4 KiB of every 64 KiB */

/* A file CRIU wrote. */
struct gck_sfile {
	char		 name[GCK_SNAME];
	int		 fd;		/* from criu; -1 once read */
	int		 pages;		/* a task's memory: not kept */
	pid_t		 pid;		/* pages: whose */
	char		*data;		/* kept: its bytes */
	size_t		 len, cap;
	uint64_t	 size;		/* bytes criu wrote */
	uint64_t	*digests;	/* pages: of each part's samples */
	size_t		 ndigests, capdigests;
	uint64_t	 partfill;
	struct XXH3_state_s *xs;
	int		 checked;	/* pages: samples checked, size set */
};

struct gck_capture;
struct gck_serve;

int	gck_capture_open(struct gck_ctx *, const char *, const char *,
	    size_t, struct gck_capture **);
int	gck_capture_run(struct gck_capture *, struct gck_criu_run *);
int	gck_capture_hooked(const struct gck_capture *);
void	gck_capture_answer(struct gck_capture *, int);
const char *gck_capture_hook_path(const struct gck_capture *);
size_t	gck_capture_nfiles(const struct gck_capture *);
const struct gck_sfile *gck_capture_file(const struct gck_capture *, size_t);
const struct gck_sfile *gck_capture_find(const struct gck_capture *,
	    const char *);
int	gck_capture_replace(struct gck_capture *, const char *, char *,
	    size_t);
int	gck_capture_add_file(struct gck_capture *, const char *, char *,
	    size_t);
size_t	gck_capture_part_size(const struct gck_capture *);
int	gck_capture_set_pages(struct gck_capture *, const char *, uint64_t);
void	gck_capture_free(struct gck_capture *);
uint64_t gck_sample_digest(const char *, size_t);
int	gck_serve_open(struct gck_ctx *, const char *,
	    const struct gck_manifest *, struct gck_serve **);
int	gck_serve_preload(struct gck_serve *, struct gck_reader *);
int	gck_serve_fill(struct gck_serve *, struct gck_parents *,
	    struct gck_parents *, struct gck_fill **);
int	gck_serve_run(struct gck_serve *, struct gck_reader *,
	    struct gck_criu_run *);
const struct gck_sfile *gck_serve_find(const struct gck_serve *,
	    const char *);
const char *gck_serve_file(const struct gck_serve *);
void	gck_serve_free(struct gck_serve *);

/* What criu dump and criu restore run while criu does (criu.h). */
struct gck_capture_job {
	struct gck_capture	*cap;
	int			(*post)(void *);	/* at the hook */
	void			*arg;
};
int	gck_capture_during(void *, struct gck_criu_run *);
struct gck_serve_job {
	struct gck_serve	*s;
	struct gck_reader	*rd;
};
int	gck_serve_during(void *, struct gck_criu_run *);

#endif /* GCK_CRIU_STREAMER_H */
