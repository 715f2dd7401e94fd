#ifndef GCK_IMAGE_NAMES_H
#define GCK_IMAGE_NAMES_H

/*
 * names.c: the names an image gives things, in one place: its entries
 * ("gpuckpt.json", "criu/NAME", "criu/NAME.partNNNNN", "gpuckpt.sums",
 * "gpuckpt.sig",
 * "gpuckpt.pages.partNNNNN"),
 * the CRIU files it holds (pages-ID.img) and the options of criu it
 * records.
 */
#define GCK_ENTRY_MANIFEST	"gpuckpt.json"
#define GCK_ENTRY_TRAILER	"gpuckpt.sums"
#define GCK_ENTRY_SIG		"gpuckpt.sig"
#define GCK_ENTRY_CRIU		"criu/"
#define GCK_ENTRY_PAGES		"gpuckpt.pages.part"	/* the page index */
#define GCK_NAME_MAX		200	/* a CRIU file name, at the most */
#define GCK_PARTS_MAX		99999	/* parts of one file */
#define GCK_ENAME_MAX		(GCK_NAME_MAX + 32)	/* an entry name */

int	gck_criu_name_ok(const char *);
int	gck_pages_id(const char *, unsigned *);
void	gck_entry_name(char *, size_t, const char *, long);
int	gck_entry_parse(const char *, char *, size_t, long *);
void	gck_entry_display(const char *, char *, size_t);
void	gck_pidx_name(char *, size_t, unsigned);
long	gck_pidx_part(const char *);
uint64_t gck_ref_size(const void *, size_t);
unsigned int	gck_criu_opt_bit(const char *);
const char *gck_criu_opt_arg(unsigned int);

#endif /* GCK_IMAGE_NAMES_H */
