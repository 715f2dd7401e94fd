#ifndef GCK_CORE_UTIL_H
#define GCK_CORE_UTIL_H

struct gck_ctx;

/* util.c */
int	gck_write_all(struct gck_ctx *, int, const void *, size_t,
	    const char *);
ssize_t	gck_read_full(struct gck_ctx *, int, void *, size_t, const char *);
int	gck_tempname(struct gck_ctx *, const char *, char **);
int	gck_workdir_name(struct gck_ctx *, const char *, char **);
int	gck_workdir_make(struct gck_ctx *, char **);
void	gck_rmtree(const char *);
int	gck_read_small_file(const char *, char *, size_t);
void	gck_hex64(uint64_t, char [17]);
int	gck_msleep(int);
int64_t	gck_now_ms(void);
int	gck_grow(struct gck_ctx *, void *, size_t *, size_t, size_t);
char	**gck_criu_envp(const char *);
void	gck_criu_envp_free(char **, const char *);
int	gck_libexec_path(struct gck_ctx *, const char *, const char *, char *,
	    size_t);

#endif /* GCK_CORE_UTIL_H */
