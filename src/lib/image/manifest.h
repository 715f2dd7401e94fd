#ifndef GCK_IMAGE_MANIFEST_H
#define GCK_IMAGE_MANIFEST_H

struct gck_ckpt_opts;
struct gck_ctx;
struct gck_cuda_facts;
struct gck_manifest;
struct gck_mcuda;
struct gck_ptree;
struct json_t;

/* manifest.c */
struct gck_imgfile {
	const char	*name;
	uint64_t	 size;
	int		 memory;	/* a process's pages: streamed last */
	int		 cuda;		/* memory: a GPU's, of custom storage */
};

char	*gck_manifest_build(struct gck_ctx *, const struct gck_ptree *,
	    const struct gck_ckpt_opts *, enum gck_after, const char *, int,
	    const struct gck_cuda_facts *, const struct gck_imgfile *, size_t,
	    struct json_t *, struct json_t *);
int	gck_new_id(char [33]);
char	*gck_manifest_build_chunks(struct gck_ctx *,
	    const struct gck_ptree *, int, struct json_t *);
int	gck_manifest_chunks_only(const struct gck_manifest *);
int	gck_manifest_level(const struct gck_manifest *);
enum gck_after gck_manifest_after(const struct gck_manifest *);
int	gck_manifest_has_file(const struct gck_manifest *, const char *);
size_t	gck_manifest_nfiles(const struct gck_manifest *);
pid_t	gck_manifest_max_tid(const struct gck_manifest *);
pid_t	gck_manifest_host_pid(const struct gck_manifest *, size_t);
int64_t	gck_manifest_file_pos(const struct gck_manifest *, const char *);
int	gck_manifest_has_file_list(const struct gck_manifest *);
int64_t	gck_manifest_file_size(const struct gck_manifest *, const char *);
int	gck_manifest_file_memory(const struct gck_manifest *, const char *);
int	gck_manifest_file_cuda(const struct gck_manifest *, const char *);
uint64_t gck_manifest_memory_bytes(const struct gck_manifest *);
int	gck_manifest_this_boot(const struct gck_manifest *);
int	gck_manifest_proc_here(const struct gck_manifest *, size_t);
struct json_t *gck_manifest_json(const struct gck_manifest *);
const char *gck_manifest_id(const struct gck_manifest *);
struct json_t *gck_manifest_chain(const struct gck_manifest *);
int	gck_manifest_cached(const struct gck_manifest *);
void	gck_boot_id(char *, size_t);

const struct gck_mcuda *gck_manifest_cuda(const struct gck_manifest *);

#endif /* GCK_IMAGE_MANIFEST_H */
