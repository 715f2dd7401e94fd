/*
 * archive-pax.c: linked into the programs of a GPU bundle (gpu-bundle)
 * with libarchive static.
 *
 * libarchive's pax writer calls __archive_write_entry_filetype_unsupported()
 * for an entry of a type no format holds; the member of libarchive.a
 * that defines it also names every format's writer, and so brings in
 * libxml2 and ICU.  gpuckpt writes regular files only, and the caller
 * sees the failure the writer returns either way: this one says so in
 * the archive's error, in our words.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>

void	__archive_write_entry_filetype_unsupported(struct archive *,
	    struct archive_entry *, const char *);

void
__archive_write_entry_filetype_unsupported(struct archive *a,
    struct archive_entry *entry, const char *format)
{
	const char	*name = archive_entry_pathname(entry);

	archive_set_error(a, EINVAL, "%s: the %s format cannot hold a file "
	    "of its type", name != NULL ? name : "an entry", format);
}
