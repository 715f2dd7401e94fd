/*
 * Unit tests for the manifest module: gck_manifest_parse() and the
 * accessors.
 */

#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <cmocka.h>

#include "gpuckpt.h"
#include "unit.h"
#include "image/manifest.h"
#include "gpu/cuda.h"

/* One manifest the parser must refuse, and how. */
struct bad_case {
	const char	*json;
	int		 code;
	const char	*msg;		/* a substring of the message */
};

static void	parse_ok(struct gck_ctx *, const char *,
		    struct gck_manifest **);
static void	check_bad(struct gck_ctx *, const struct bad_case *, size_t);
static void	test_minimal(void **);
static void	test_accessors(void **);
static void	test_full_manifest(void **);
static void	test_shell_job(void **);
static void	test_zombie(void **);
static void	test_start(void **);
static void	test_length_bounded(void **);
static void	test_reuse_ctx(void **);
static void	test_newer_format(void **);
static void	test_bad_format(void **);
static void	test_missing_format(void **);
static void	test_not_object(void **);
static void	test_invalid_json(void **);
static void	test_duplicate_key(void **);
static void	test_root_not_listed(void **);
static void	test_duplicate_pids(void **);
static void	test_empty_processes(void **);
static void	test_bad_process_list(void **);
static void	test_bad_root_pid(void **);
static void	test_bad_pid(void **);
static void	test_free_null(void **);
static void	test_criu_opts(void **);
static void	test_bad_criu_opts(void **);
static void	test_kind(void **);
static void	test_custom_storage(void **);
static void	test_cuda_job(void **);

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/* A manifest as gpuckpt writes it, every key present. */
static const char full_manifest[] =
    "{\n"
    "  \"format\": 1,\n"
    "  \"tool\": \"gpuckpt 0.1.0\",\n"
    "  \"created\": \"2025-01-02T03:04:05Z\",\n"
    "  \"host\": {\n"
    "    \"hostname\": \"node1\",\n"
    "    \"kernel\": \"6.1.0-18-amd64\",\n"
    "    \"arch\": \"x86_64\",\n"
    "    \"cpu_flags\": [\"fpu\", \"sse\", \"avx2\"]\n"
    "  },\n"
    "  \"criu\": {\"version\": \"4.1.1\"},\n"
    "  \"cuda\": null,\n"
    "  \"root_pid\": 4242,\n"
    "  \"shell_job\": false,\n"
    "  \"processes\": [\n"
    "    {\"pid\": 4242, \"ppid\": 1, \"pgid\": 4242, \"sid\": 4242,\n"
    "     \"uid\": 0, \"gid\": 0, \"comm\": \"trainer\",\n"
    "     \"cmdline\": [\"python3\", \"train.py\"], \"cwd\": \"/srv\",\n"
    "     \"threads\": 4, \"memory\": {\"vm_size\": 1048576,\n"
    "     \"vm_rss\": 65536, \"rss_anon\": 32768, \"rss_file\": 32768,\n"
    "     \"rss_shmem\": 0}},\n"
    "    {\"pid\": 4250, \"ppid\": 4242, \"pgid\": 4242, \"sid\": 4242,\n"
    "     \"uid\": 0, \"gid\": 0, \"comm\": \"loader\",\n"
    "     \"cmdline\": [], \"cwd\": \"/srv\", \"threads\": 1,\n"
    "     \"memory\": {\"vm_size\": 0, \"vm_rss\": 0, \"rss_anon\": 0,\n"
    "     \"rss_file\": 0, \"rss_shmem\": 0}}\n"
    "  ],\n"
    "  \"options\": {\"compress\": \"zstd\", \"level\": 3,"
    " \"after\": \"kill\"},\n"
    "  \"part_size\": 16777216\n"
    "}\n";

/* Parses json, which must be accepted. */
static void
parse_ok(struct gck_ctx *ctx, const char *json, struct gck_manifest **mp)
{
	int	r;

	*mp = NULL;
	r = gck_manifest_parse(ctx, json, strlen(json), mp);
	if (r != GCK_OK)
		fail_msg("parse of %s: got %d (%s)", json, r,
		    gck_error_string(ctx) != NULL ? gck_error_string(ctx) :
		    "no message");
	assert_non_null(*mp);
}

/* Parses each case, which must be refused with its code and message. */
static void
check_bad(struct gck_ctx *ctx, const struct bad_case *c, size_t n)
{
	struct gck_manifest	*m;
	const char		*e;
	size_t			 i;
	int			 r;

	for (i = 0; i < n; i++) {
		/* Not NULL: the parser must reset it on failure. */
		m = (struct gck_manifest *)(uintptr_t)1;
		r = gck_manifest_parse(ctx, c[i].json, strlen(c[i].json),
		    &m);
		e = gck_error_string(ctx);
		if (r != c[i].code)
			fail_msg("%s: got %d (%s), want %d", c[i].json, r,
			    e != NULL ? e : "no message", c[i].code);
		if (m != NULL)
			fail_msg("%s: manifest returned on failure",
			    c[i].json);
		if (gck_error_code(ctx) != c[i].code)
			fail_msg("%s: gck_error_code %d, want %d", c[i].json,
			    gck_error_code(ctx), c[i].code);
		if (e == NULL || strstr(e, c[i].msg) == NULL)
			fail_msg("%s: message '%s' lacks '%s'", c[i].json,
			    e != NULL ? e : "(null)", c[i].msg);
		if (strchr(e, '\n') != NULL)
			fail_msg("%s: message '%s' is not one line",
			    c[i].json, e);
	}
}

static void
test_minimal(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_manifest	*m;

	parse_ok(ctx, "{\"format\":1,\"root_pid\":7,"
	    "\"processes\":[{\"pid\":7}]}", &m);
	assert_int_equal(gck_manifest_format(m), 1);
	assert_int_equal(gck_manifest_root_pid(m), 7);
	assert_int_equal(gck_manifest_nprocs(m), 1);
	assert_int_equal(gck_manifest_pid(m, 0), 7);
	/* No comm: a placeholder, never NULL for a listed process. */
	assert_string_equal(gck_manifest_comm(m, 0), "?");
	assert_int_equal(gck_manifest_shell_job(m), 0);
	assert_int_equal(gck_error_code(ctx), GCK_OK);
	gck_manifest_free(m);
}

static void
test_accessors(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_manifest	*m;

	parse_ok(ctx, "{\"format\":1,\"root_pid\":100,\"shell_job\":true,"
	    "\"processes\":[{\"pid\":100,\"comm\":\"bash\"},"
	    "{\"pid\":101,\"comm\":\"sleep\"},{\"pid\":2147483647,"
	    "\"comm\":\"\"}]}", &m);
	assert_int_equal(gck_manifest_format(m), 1);
	assert_int_equal(gck_manifest_root_pid(m), 100);
	assert_int_equal(gck_manifest_shell_job(m), 1);
	assert_int_equal(gck_manifest_nprocs(m), 3);
	assert_int_equal(gck_manifest_pid(m, 0), 100);
	assert_int_equal(gck_manifest_pid(m, 1), 101);
	assert_int_equal(gck_manifest_pid(m, 2), 2147483647);
	assert_string_equal(gck_manifest_comm(m, 0), "bash");
	assert_string_equal(gck_manifest_comm(m, 1), "sleep");
	assert_string_equal(gck_manifest_comm(m, 2), "");
	/* Out of range: accessors never fail, they say "none". */
	assert_int_equal(gck_manifest_pid(m, 3), -1);
	assert_null(gck_manifest_comm(m, 3));
	assert_int_equal(gck_manifest_pid(m, (size_t)-1), -1);
	assert_null(gck_manifest_comm(m, (size_t)-1));
	gck_manifest_free(m);
}

static void
test_full_manifest(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_manifest	*m;

	parse_ok(ctx, full_manifest, &m);
	assert_int_equal(gck_manifest_format(m), 1);
	assert_int_equal(gck_manifest_root_pid(m), 4242);
	assert_int_equal(gck_manifest_shell_job(m), 0);
	assert_int_equal(gck_manifest_nprocs(m), 2);
	assert_int_equal(gck_manifest_pid(m, 1), 4250);
	assert_string_equal(gck_manifest_comm(m, 0), "trainer");
	assert_string_equal(gck_manifest_comm(m, 1), "loader");
	gck_manifest_free(m);
}

static void
test_shell_job(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_manifest	*m;

	parse_ok(ctx, "{\"format\":1,\"root_pid\":9,\"shell_job\":false,"
	    "\"processes\":[{\"pid\":9}]}", &m);
	assert_int_equal(gck_manifest_shell_job(m), 0);
	gck_manifest_free(m);
	parse_ok(ctx, "{\"shell_job\":true,\"processes\":[{\"pid\":9}],"
	    "\"root_pid\":9,\"format\":1}", &m);
	assert_int_equal(gck_manifest_shell_job(m), 1);
	gck_manifest_free(m);
}

/* A process that was a zombie says so; the key is absent otherwise. */
static void
test_zombie(void **state)
{
	static const struct bad_case	c[] = {
		{ "{\"format\":1,\"root_pid\":1,\"processes\":[{\"pid\":1},"
		    "{\"pid\":2,\"zombie\":\"yes\"}]}",
		    GCK_EFORMAT, "bad process 2 in the manifest" },
		{ "{\"format\":1,\"root_pid\":1,\"processes\":[{\"pid\":1},"
		    "{\"pid\":2,\"zombie\":1}]}",
		    GCK_EFORMAT, "bad process 2 in the manifest" },
	};
	struct gck_ctx		*ctx = *state;
	struct gck_manifest	*m;

	parse_ok(ctx, "{\"format\":1,\"root_pid\":5,\"processes\":["
	    "{\"pid\":5},{\"pid\":6,\"zombie\":true},"
	    "{\"pid\":7,\"zombie\":false}]}", &m);
	assert_int_equal(gck_manifest_zombie(m, 0), 0);
	assert_int_equal(gck_manifest_zombie(m, 1), 1);
	assert_int_equal(gck_manifest_zombie(m, 2), 0);
	assert_int_equal(gck_manifest_zombie(m, 3), 0);
	assert_int_equal(gck_manifest_zombie(m, (size_t)-1), 0);
	gck_manifest_free(m);
	check_bad(ctx, c, NELEM(c));
}

/* A process's start time, optional, read back as given; 0 without it. */
static void
test_start(void **state)
{
	static const struct bad_case	c[] = {
		{ "{\"format\":1,\"root_pid\":1,\"processes\":[{\"pid\":1},"
		    "{\"pid\":2,\"start\":-5}]}",
		    GCK_EFORMAT, "bad process 2 in the manifest" },
		{ "{\"format\":1,\"root_pid\":1,\"processes\":[{\"pid\":1},"
		    "{\"pid\":2,\"start\":\"12\"}]}",
		    GCK_EFORMAT, "bad process 2 in the manifest" },
	};
	struct gck_ctx		*ctx = *state;
	struct gck_manifest	*m;

	parse_ok(ctx, "{\"format\":1,\"root_pid\":5,\"processes\":["
	    "{\"pid\":5,\"start\":2988812},{\"pid\":6}]}", &m);
	assert_int_equal(gck_manifest_start(m, 0), 2988812);
	assert_int_equal(gck_manifest_start(m, 1), 0);
	assert_int_equal(gck_manifest_start(m, 2), 0);
	gck_manifest_free(m);
	check_bad(ctx, c, NELEM(c));
}

/* Only len bytes are parsed: the text need not end in a NUL. */
static void
test_length_bounded(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_manifest	*m = NULL;
	const char		*json = "{\"format\":1,\"root_pid\":3,"
	    "\"processes\":[{\"pid\":3,\"comm\":\"init\"}]}";
	char			*buf;
	size_t			 len = strlen(json);

	/* Copied without its NUL, followed by garbage. */
	assert_non_null(buf = malloc(len + 8));
	memcpy(buf, json, len);
	memcpy(buf + len, "}}garbage", 8);
	assert_int_equal(gck_manifest_parse(ctx, buf, len, &m), GCK_OK);
	assert_non_null(m);
	assert_int_equal(gck_manifest_root_pid(m), 3);
	assert_string_equal(gck_manifest_comm(m, 0), "init");
	gck_manifest_free(m);

	/* One byte short is invalid JSON. */
	assert_int_equal(gck_manifest_parse(ctx, buf, len - 1, &m),
	    GCK_EFORMAT);
	assert_null(m);
	assert_non_null(strstr(gck_error_string(ctx), "not a gpuckpt image"));
	free(buf);
}

/* A failure, then a success on the same context. */
static void
test_reuse_ctx(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_manifest	*m = NULL;

	assert_int_equal(gck_manifest_parse(ctx, "{}", 2, &m), GCK_EFORMAT);
	assert_null(m);
	parse_ok(ctx, "{\"format\":1,\"root_pid\":5,"
	    "\"processes\":[{\"pid\":5}]}", &m);
	assert_int_equal(gck_manifest_root_pid(m), 5);
	gck_manifest_free(m);
}

static void
test_newer_format(void **state)
{
	static const struct bad_case	c[] = {
		{ "{\"format\":4,\"root_pid\":1,\"processes\":[{\"pid\":1}]}",
		    GCK_EVERSION, "version 4 is newer" },
		/* Newer is said first: a newer format may change the rest. */
		{ "{\"format\":4}", GCK_EVERSION, "newer" },
		{ "{\"format\":4,\"processes\":\"elsewhere\"}", GCK_EVERSION,
		    "newer" },
		{ "{\"format\":99,\"root_pid\":1,\"processes\":[]}",
		    GCK_EVERSION, "version 99 is newer" },
	};

	check_bad(*state, c, NELEM(c));
	assert_non_null(strstr(gck_error_string(*state), "(3)"));
}

static void
test_bad_format(void **state)
{
	static const struct bad_case	c[] = {
		{ "{\"format\":0,\"root_pid\":1,\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "bad format version 0" },
		{ "{\"format\":-1,\"root_pid\":1,\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "bad format version -1" },
	};

	check_bad(*state, c, NELEM(c));
}

static void
test_missing_format(void **state)
{
	static const struct bad_case	c[] = {
		{ "{\"root_pid\":1,\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "no format version" },
		{ "{}", GCK_EFORMAT, "no format version" },
		{ "{\"format\":\"1\",\"root_pid\":1,"
		    "\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "no format version" },
		{ "{\"format\":null,\"root_pid\":1,"
		    "\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "no format version" },
		{ "{\"Format\":1,\"root_pid\":1,\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "no format version" },
	};

	check_bad(*state, c, NELEM(c));
}

static void
test_not_object(void **state)
{
	static const struct bad_case	c[] = {
		{ "[{\"format\":1}]", GCK_EFORMAT, "not a JSON object" },
		{ "42", GCK_EFORMAT, "not a JSON object" },
		{ "\"format\"", GCK_EFORMAT, "not a JSON object" },
		{ "null", GCK_EFORMAT, "not a JSON object" },
		{ "true", GCK_EFORMAT, "not a JSON object" },
	};

	check_bad(*state, c, NELEM(c));
	assert_non_null(strstr(gck_error_string(*state),
	    "not a gpuckpt image"));
}

static void
test_invalid_json(void **state)
{
	static const struct bad_case	c[] = {
		{ "", GCK_EFORMAT, "not a gpuckpt image" },
		{ "{", GCK_EFORMAT, "not a gpuckpt image" },
		{ "{\"format\":1,}", GCK_EFORMAT, "not a gpuckpt image" },
		{ "{\"format\":1} {\"format\":1}", GCK_EFORMAT,
		    "not a gpuckpt image" },
		{ "{format:1}", GCK_EFORMAT, "not a gpuckpt image" },
		{ "\x28\xb5\x2f\xfd garbage", GCK_EFORMAT,
		    "not a gpuckpt image" },
	};

	check_bad(*state, c, NELEM(c));
}

static void
test_duplicate_key(void **state)
{
	static const struct bad_case	c[] = {
		{ "{\"format\":1,\"format\":1,\"root_pid\":1,"
		    "\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "not a gpuckpt image" },
		{ "{\"format\":1,\"root_pid\":1,\"root_pid\":2,"
		    "\"processes\":[{\"pid\":1},{\"pid\":2}]}",
		    GCK_EFORMAT, "not a gpuckpt image" },
	};

	check_bad(*state, c, NELEM(c));
}

static void
test_root_not_listed(void **state)
{
	static const struct bad_case	c[] = {
		{ "{\"format\":1,\"root_pid\":5,"
		    "\"processes\":[{\"pid\":6},{\"pid\":7}]}",
		    GCK_EFORMAT, "root pid 5 is not in the process list" },
		{ "{\"format\":1,\"root_pid\":1,\"processes\":[{\"pid\":2}]}",
		    GCK_EFORMAT, "root pid 1 is not in the process list" },
	};

	check_bad(*state, c, NELEM(c));
}

static void
test_duplicate_pids(void **state)
{
	static const struct bad_case	c[] = {
		{ "{\"format\":1,\"root_pid\":100,\"processes\":"
		    "[{\"pid\":100},{\"pid\":101},{\"pid\":101}]}",
		    GCK_EFORMAT, "pid 101 twice" },
		{ "{\"format\":1,\"root_pid\":100,\"processes\":"
		    "[{\"pid\":100,\"comm\":\"a\"},{\"pid\":100,"
		    "\"comm\":\"b\"}]}",
		    GCK_EFORMAT, "pid 100 twice" },
	};

	check_bad(*state, c, NELEM(c));
}

static void
test_empty_processes(void **state)
{
	static const struct bad_case	c[] = {
		{ "{\"format\":1,\"root_pid\":1,\"processes\":[]}",
		    GCK_EFORMAT, "bad process list" },
	};

	check_bad(*state, c, NELEM(c));
}

static void
test_bad_process_list(void **state)
{
	static const struct bad_case	c[] = {
		{ "{\"format\":1,\"root_pid\":1}",
		    GCK_EFORMAT, "bad process list" },
		{ "{\"format\":1,\"root_pid\":1,\"processes\":{\"pid\":1}}",
		    GCK_EFORMAT, "bad process list" },
		{ "{\"format\":1,\"root_pid\":1,\"processes\":null}",
		    GCK_EFORMAT, "bad process list" },
		{ "{\"format\":1,\"root_pid\":1,\"shell_job\":\"yes\","
		    "\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "bad process list" },
	};

	check_bad(*state, c, NELEM(c));
}

static void
test_bad_root_pid(void **state)
{
	static const struct bad_case	c[] = {
		{ "{\"format\":1,\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "bad process list" },
		{ "{\"format\":1,\"root_pid\":0,\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "bad process list" },
		{ "{\"format\":1,\"root_pid\":-1,"
		    "\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "bad process list" },
		{ "{\"format\":1,\"root_pid\":2147483648,"
		    "\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "bad process list" },
		{ "{\"format\":1,\"root_pid\":\"1\","
		    "\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "bad process list" },
		{ "{\"format\":1,\"root_pid\":1.0,"
		    "\"processes\":[{\"pid\":1}]}",
		    GCK_EFORMAT, "bad process list" },
	};

	check_bad(*state, c, NELEM(c));
}

static void
test_bad_pid(void **state)
{
	static const struct bad_case	c[] = {
		{ "{\"format\":1,\"root_pid\":1,"
		    "\"processes\":[{\"pid\":1},{\"pid\":0}]}",
		    GCK_EFORMAT, "bad process 2 in the manifest" },
		{ "{\"format\":1,\"root_pid\":1,"
		    "\"processes\":[{\"pid\":-5},{\"pid\":1}]}",
		    GCK_EFORMAT, "bad process 1 in the manifest" },
		{ "{\"format\":1,\"root_pid\":1,"
		    "\"processes\":[{\"pid\":1},{\"comm\":\"x\"}]}",
		    GCK_EFORMAT, "bad process 2" },
		{ "{\"format\":1,\"root_pid\":1,"
		    "\"processes\":[{\"pid\":1},{\"pid\":\"2\"}]}",
		    GCK_EFORMAT, "bad process 2" },
		{ "{\"format\":1,\"root_pid\":1,"
		    "\"processes\":[{\"pid\":1},{\"pid\":4294967298}]}",
		    GCK_EFORMAT, "bad process 2" },
		{ "{\"format\":1,\"root_pid\":1,"
		    "\"processes\":[{\"pid\":1},2]}",
		    GCK_EFORMAT, "bad process 2" },
		{ "{\"format\":1,\"root_pid\":1,"
		    "\"processes\":[{\"pid\":1,\"comm\":7}]}",
		    GCK_EFORMAT, "bad process 1" },
	};

	check_bad(*state, c, NELEM(c));
}

#define CRIU_M(criu) "{\"format\":1,\"root_pid\":7," \
	"\"processes\":[{\"pid\":7}],\"criu\":" criu "}"

/* criu.options: absent (older images), empty, or names criu knows. */
static void
test_criu_opts(void **state)
{
	struct gck_ctx		*ctx = *state;
	struct gck_manifest	*m;

	parse_ok(ctx, "{\"format\":1,\"root_pid\":7,"
	    "\"processes\":[{\"pid\":7}]}", &m);
	assert_int_equal(gck_manifest_criu_opts(m), 0);
	gck_manifest_free(m);
	parse_ok(ctx, CRIU_M("{\"version\":\"4.1.1\"}"), &m);
	assert_int_equal(gck_manifest_criu_opts(m), 0);
	gck_manifest_free(m);
	parse_ok(ctx, CRIU_M("{\"version\":\"4.1.1\",\"options\":[]}"), &m);
	assert_int_equal(gck_manifest_criu_opts(m), 0);
	gck_manifest_free(m);
	parse_ok(ctx, CRIU_M("{\"options\":[\"file-locks\"]}"), &m);
	assert_int_equal(gck_manifest_criu_opts(m), GCK_CRIU_FILE_LOCKS);
	gck_manifest_free(m);
	parse_ok(ctx, CRIU_M("{\"version\":\"4.1.1\",\"options\":"
	    "[\"ext-unix-sk\",\"tcp-established\",\"file-locks\"]}"), &m);
	assert_int_equal(gck_manifest_criu_opts(m), GCK_CRIU_EXT_UNIX_SK |
	    GCK_CRIU_TCP_ESTABLISHED | GCK_CRIU_FILE_LOCKS);
	gck_manifest_free(m);
	assert_string_equal(gck_criu_opt_name(GCK_CRIU_TCP_ESTABLISHED),
	    "tcp-established");
	assert_string_equal(gck_criu_opt_name(GCK_CRIU_EXT_UNIX_SK),
	    "ext-unix-sk");
	assert_string_equal(gck_criu_opt_name(GCK_CRIU_FILE_LOCKS),
	    "file-locks");
	assert_null(gck_criu_opt_name(0));
	assert_null(gck_criu_opt_name(GCK_CRIU_FILE_LOCKS |
	    GCK_CRIU_EXT_UNIX_SK));
}

static void
test_bad_criu_opts(void **state)
{
	static const struct bad_case	c[] = {
		/* An option of a newer gpuckpt: refused, by name. */
		{ CRIU_M("{\"options\":[\"file-locks\",\"ghost-fiemap\"]}"),
		    GCK_EVERSION, "dumped with criu option 'ghost-fiemap', which "
		    "this version of gpuckpt does not know: upgrade gpuckpt" },
		{ CRIU_M("{\"options\":[\"--file-locks\"]}"),
		    GCK_EVERSION, "criu option '--file-locks'" },
		{ CRIU_M("{\"options\":[\"\"]}"),
		    GCK_EVERSION, "criu option ''" },
		{ CRIU_M("{\"options\":[\"file-locks\",\"file-locks\"]}"),
		    GCK_EFORMAT, "bad criu section in the manifest" },
		{ CRIU_M("{\"options\":[7]}"),
		    GCK_EFORMAT, "bad criu section" },
		{ CRIU_M("{\"options\":\"file-locks\"}"),
		    GCK_EFORMAT, "bad criu section" },
		{ CRIU_M("{\"options\":null}"),
		    GCK_EFORMAT, "bad criu section" },
		{ CRIU_M("[\"file-locks\"]"),
		    GCK_EFORMAT, "bad criu section" },
		{ CRIU_M("\"4.1.1\""),
		    GCK_EFORMAT, "bad criu section" },
	};

	check_bad(*state, c, NELEM(c));
}

#define KIND_M(kind, more)						\
	"{\"format\":2,\"id\":\"0123456789abcdef0123456789abcdef\","	\
	"\"root_pid\":7,\"processes\":[{\"pid\":7}],\"kind\":" kind more "}"

/* kind "chunks": an image of chunks only, and nothing else goes. */
static void
test_kind(void **state)
{
	struct gck_manifest	*m;
	static const struct bad_case c[] = {
		{ KIND_M("\"checkpoint\"", ""), GCK_EFORMAT,
		    "corrupt image: bad kind in the manifest" },
		{ KIND_M("7", ""), GCK_EFORMAT, "bad kind" },
		{ KIND_M("null", ""), GCK_EFORMAT, "bad kind" },
		{ KIND_M("\"chunks\"", ",\"files\":[]"), GCK_EFORMAT,
		    "bad kind" },
		{ KIND_M("\"chunks\"", ",\"parent\":{\"id\":"
		    "\"0123456789abcdef0123456789abcdee\",\"chain\":"
		    "[\"0123456789abcdef0123456789abcdee\"]}"), GCK_EFORMAT,
		    "bad kind" },
		{ "{\"format\":1,\"root_pid\":7,\"processes\":"
		    "[{\"pid\":7}],\"kind\":\"chunks\"}", GCK_EFORMAT,
		    "bad kind" },
	};

	parse_ok(*state, KIND_M("\"chunks\"", ""), &m);
	assert_int_equal(gck_manifest_chunks_only(m), 1);
	gck_manifest_free(m);
	parse_ok(*state, "{\"format\":2,\"root_pid\":7,"
	    "\"processes\":[{\"pid\":7}]}", &m);
	assert_int_equal(gck_manifest_chunks_only(m), 0);
	gck_manifest_free(m);
	check_bad(*state, c, NELEM(c));
}

#define JOB_M(job)							\
	"{\"format\":2,\"root_pid\":7,\"processes\":[{\"pid\":7},"	\
	"{\"pid\":8,\"ppid\":7}],"					\
	"\"cuda\":{\"driver_version\":13010,\"gpus\":[],"		\
	"\"processes\":[]" job "},\"files\":[]}"

/*
 * A job (gpuckpt --launch): its file's holder is a process of the list,
 * its descriptor a number; without the key, no job.
 */
static void
test_cuda_job(void **state)
{
	struct gck_manifest	*m;
	static const struct bad_case c[] = {
		{ JOB_M(",\"job\":{\"holder\":9,\"fd\":3}"), GCK_EFORMAT,
		    "corrupt image: the job's file is held by process 9, "
		    "which is not in the process list" },
		{ JOB_M(",\"job\":{\"holder\":8,\"fd\":-1}"), GCK_EFORMAT,
		    "corrupt image: bad job in the manifest" },
		{ JOB_M(",\"job\":{\"holder\":0,\"fd\":3}"), GCK_EFORMAT,
		    "bad job" },
		{ JOB_M(",\"job\":{\"holder\":8}"), GCK_EFORMAT, "bad job" },
		{ JOB_M(",\"job\":{\"holder\":\"8\",\"fd\":3}"),
		    GCK_EFORMAT, "bad job" },
		{ JOB_M(",\"job\":[8,3]"), GCK_EFORMAT, "bad job" },
	};

	parse_ok(*state, JOB_M(",\"job\":{\"holder\":8,\"fd\":3}"), &m);
	assert_int_equal(gck_manifest_cuda(m)->job_holder, 8);
	assert_int_equal(gck_manifest_cuda(m)->job_fd, 3);
	gck_manifest_free(m);
	parse_ok(*state, JOB_M(""), &m);
	assert_int_equal(gck_manifest_cuda(m)->job_holder, 0);
	gck_manifest_free(m);
	check_bad(*state, c, NELEM(c));
}

/*
 * An NCCL job's ranks quiesced: a count, one at least, no more than the
 * processes; without the key, none.
 */
static void
test_cuda_nccl(void **state)
{
	struct gck_manifest	*m;
	static const struct bad_case c[] = {
		{ JOB_M(",\"nccl\":{\"ranks\":3}"), GCK_EFORMAT,
		    "corrupt image: bad nccl in the manifest" },
		{ JOB_M(",\"nccl\":{\"ranks\":0}"), GCK_EFORMAT,
		    "bad nccl" },
		{ JOB_M(",\"nccl\":{\"ranks\":\"2\"}"), GCK_EFORMAT,
		    "bad nccl" },
		{ JOB_M(",\"nccl\":{}"), GCK_EFORMAT, "bad nccl" },
		{ JOB_M(",\"nccl\":2"), GCK_EFORMAT, "bad nccl" },
	};

	parse_ok(*state, JOB_M(",\"nccl\":{\"ranks\":2}"), &m);
	assert_int_equal(gck_manifest_cuda(m)->nccl_ranks, 2);
	gck_manifest_free(m);
	parse_ok(*state, JOB_M(""), &m);
	assert_int_equal(gck_manifest_cuda(m)->nccl_ranks, 0);
	gck_manifest_free(m);
	check_bad(*state, c, NELEM(c));
}

#define CS_M(store, files)						\
	"{\"format\":2,\"root_pid\":7,\"processes\":[{\"pid\":7}],"	\
	"\"cuda\":{\"driver_version\":13040,\"gpus\":[{\"index\":0,"	\
	"\"uuid\":\"GPU-aaaaaaaa-1111-4000-8000-000000000001\","		\
	"\"name\":\"H100\",\"compute_capability\":\"9.0\","		\
	"\"memory\":1073741824,\"pci_bus_id\":\"0000:01:00.0\"}],"	\
	"\"processes\":[{\"pid\":7,\"comm\":\"w\",\"gpus\":[{\"uuid\":"	\
	"\"GPU-aaaaaaaa-1111-4000-8000-000000000001\",\"memory\":8192}]"	\
	store "}]},\"files\":[{\"name\":\"pages-1.img\",\"size\":4096,"	\
	"\"memory\":true}" files "]}"
#define CS_STORE	",\"custom_storage\":[{\"file\":\"cuda-7-0.mem\"," \
	"\"size\":8192}]"
#define CS_FILE		",{\"name\":\"cuda-7-0.mem\",\"size\":8192," \
	"\"memory\":true,\"cuda\":true}"

/*
 * Device memory of custom storage: the process names its files, a GPU
 * each in order, and the file list has them as such, with their sizes,
 * and no other.
 */
static void
test_custom_storage(void **state)
{
	const struct gck_mcuda	*mc;
	struct gck_manifest	*m;
	static const struct bad_case c[] = {
		/* named out of its place, or for another process */
		{ CS_M(",\"custom_storage\":[{\"file\":\"cuda-7-1.mem\","
		    "\"size\":8192}]", CS_FILE), GCK_EFORMAT, "corrupt image: "
		    "bad custom storage of CUDA process 7 in the manifest" },
		{ CS_M(",\"custom_storage\":[{\"file\":\"cuda-8-0.mem\","
		    "\"size\":8192}]", CS_FILE), GCK_EFORMAT,
		    "bad custom storage" },
		{ CS_M(",\"custom_storage\":[{\"file\":\"cuda-7-0.mem\","
		    "\"size\":-1}]", CS_FILE), GCK_EFORMAT,
		    "bad custom storage" },
		{ CS_M(",\"custom_storage\":{}", CS_FILE), GCK_EFORMAT,
		    "bad custom storage" },
		/* not in the file list, or of another size there */
		{ CS_M(CS_STORE, ""), GCK_EFORMAT, "corrupt image: the device "
		    "memory of process 7, GPU 0, is not in the file list as "
		    "the manifest gives it" },
		{ CS_M(CS_STORE, ",{\"name\":\"cuda-7-0.mem\",\"size\":4096,"
		    "\"memory\":true,\"cuda\":true}"), GCK_EFORMAT,
		    "is not in the file list as the manifest gives it" },
		{ CS_M(CS_STORE, ",{\"name\":\"cuda-7-0.mem\",\"size\":8192,"
		    "\"memory\":true}"), GCK_EFORMAT,
		    "is not in the file list as the manifest gives it" },
		/* device memory that is not memory */
		{ CS_M(CS_STORE, ",{\"name\":\"cuda-7-0.mem\",\"size\":8192,"
		    "\"cuda\":true}"), GCK_EFORMAT,
		    "bad file list in the manifest" },
		/* a file of device memory that no process names */
		{ CS_M("", CS_FILE), GCK_EFORMAT, "corrupt image: the file list "
		    "has device memory no CUDA process names" },
		/* chunks not of whole pages, negative, or over a part's most */
		{ CS_M(",\"custom_storage\":[{\"file\":\"cuda-7-0.mem\","
		    "\"size\":8192,\"chunk\":4097}]", CS_FILE), GCK_EFORMAT,
		    "bad custom storage" },
		{ CS_M(",\"custom_storage\":[{\"file\":\"cuda-7-0.mem\","
		    "\"size\":8192,\"chunk\":-4096}]", CS_FILE), GCK_EFORMAT,
		    "bad custom storage" },
		{ CS_M(",\"custom_storage\":[{\"file\":\"cuda-7-0.mem\","
		    "\"size\":8192,\"chunk\":134217728}]", CS_FILE),
		    GCK_EFORMAT, "bad custom storage" },
		{ CS_M(",\"custom_storage\":[{\"file\":\"cuda-7-0.mem\","
		    "\"size\":8192,\"chunk\":\"1M\"}]", CS_FILE), GCK_EFORMAT,
		    "bad custom storage" },
	};

	parse_ok(*state, CS_M(CS_STORE, CS_FILE), &m);
	mc = gck_manifest_cuda(m);
	assert_non_null(mc);
	assert_int_equal(mc->procs[0].custom, 1);
	assert_int_equal(mc->procs[0].ndev, 1);
	assert_int_equal(mc->procs[0].devsize[0], 8192);
	/* (an older image's: its chunks of any size) */
	assert_int_equal(mc->procs[0].devchunk[0], 0);
	assert_int_equal(gck_manifest_file_cuda(m, "cuda-7-0.mem"), 1);
	assert_int_equal(gck_manifest_file_memory(m, "cuda-7-0.mem"), 1);
	assert_int_equal(gck_manifest_file_cuda(m, "pages-1.img"), 0);
	gck_manifest_free(m);
	parse_ok(*state, CS_M(",\"custom_storage\":[{\"file\":"
	    "\"cuda-7-0.mem\",\"size\":8192,\"chunk\":1048576}]", CS_FILE),
	    &m);
	assert_int_equal(gck_manifest_cuda(m)->procs[0].devchunk[0], 1048576);
	gck_manifest_free(m);
	parse_ok(*state, CS_M("", ""), &m);
	assert_int_equal(gck_manifest_cuda(m)->procs[0].custom, 0);
	gck_manifest_free(m);
	check_bad(*state, c, NELEM(c));
}

#define SG_STORE(chunk, seg)						\
	",\"custom_storage\":[{\"file\":\"cuda-7-0.mem\","		\
	"\"size\":33558528,\"chunk\":" chunk ",\"segment\":" seg "}]"
#define SG_FILE(name, size)						\
	",{\"name\":\"" name "\",\"size\":" size ",\"memory\":true,"	\
	"\"cuda\":true}"
#define SG_FILES							\
	SG_FILE("cuda-7-0.mem.00000", "16777216")			\
	SG_FILE("cuda-7-0.mem.00001", "16777216")			\
	SG_FILE("cuda-7-0.mem.00002", "4096")

/*
 * Device memory of custom storage in segments: a GPU's memory in files
 * of the segment's size, the last the rest, each listed as such, and
 * segments of whole chunks.
 */
static void
test_custom_segments(void **state)
{
	const struct gck_mcuda	*mc;
	struct gck_manifest	*m;
	static const struct bad_case c[] = {
		/* a segment missing, of another size, or one too many */
		{ CS_M(SG_STORE("1048576", "16777216"),
		    SG_FILE("cuda-7-0.mem.00000", "16777216")
		    SG_FILE("cuda-7-0.mem.00002", "4096")), GCK_EFORMAT,
		    "corrupt image: the device memory of process 7, GPU 0, is "
		    "not in the file list as the manifest gives it" },
		{ CS_M(SG_STORE("1048576", "16777216"),
		    SG_FILE("cuda-7-0.mem.00000", "16777216")
		    SG_FILE("cuda-7-0.mem.00001", "16773120")
		    SG_FILE("cuda-7-0.mem.00002", "8192")), GCK_EFORMAT,
		    "is not in the file list as the manifest gives it" },
		{ CS_M(SG_STORE("1048576", "16777216"), SG_FILES
		    SG_FILE("cuda-7-0.mem.00003", "0")), GCK_EFORMAT,
		    "the file list has device memory no CUDA process names" },
		/* the memory in one file where the manifest says segments */
		{ CS_M(SG_STORE("1048576", "16777216"),
		    SG_FILE("cuda-7-0.mem", "33558528")), GCK_EFORMAT,
		    "is not in the file list as the manifest gives it" },
		/* segments not of whole chunks, without chunks, negative */
		{ CS_M(SG_STORE("1048576", "16781312"), SG_FILES), GCK_EFORMAT,
		    "bad custom storage of CUDA process 7 in the manifest" },
		{ CS_M(SG_STORE("0", "16777216"), SG_FILES), GCK_EFORMAT,
		    "bad custom storage" },
		{ CS_M(SG_STORE("1048576", "-16777216"), SG_FILES),
		    GCK_EFORMAT, "bad custom storage" },
		/* more segments than an image lists */
		{ CS_M(",\"custom_storage\":[{\"file\":\"cuda-7-0.mem\","
		    "\"size\":268439552,\"chunk\":4096,\"segment\":4096}]",
		    SG_FILES), GCK_EFORMAT, "bad custom storage" },
	};

	parse_ok(*state, CS_M(SG_STORE("1048576", "16777216"), SG_FILES), &m);
	mc = gck_manifest_cuda(m);
	assert_non_null(mc);
	assert_int_equal(mc->procs[0].devsize[0], 33558528);
	assert_int_equal(mc->procs[0].devseg[0], 16777216);
	assert_int_equal(gck_manifest_file_cuda(m, "cuda-7-0.mem.00002"), 1);
	assert_int_equal(gck_manifest_file_cuda(m, "cuda-7-0.mem"), 0);
	gck_manifest_free(m);
	check_bad(*state, c, NELEM(c));
}

static void
test_free_null(void **state)
{
	gck_manifest_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_minimal),
		cmocka_unit_test(test_accessors),
		cmocka_unit_test(test_full_manifest),
		cmocka_unit_test(test_shell_job),
		cmocka_unit_test(test_zombie),
		cmocka_unit_test(test_start),
		cmocka_unit_test(test_length_bounded),
		cmocka_unit_test(test_reuse_ctx),
		cmocka_unit_test(test_newer_format),
		cmocka_unit_test(test_bad_format),
		cmocka_unit_test(test_missing_format),
		cmocka_unit_test(test_not_object),
		cmocka_unit_test(test_invalid_json),
		cmocka_unit_test(test_duplicate_key),
		cmocka_unit_test(test_root_not_listed),
		cmocka_unit_test(test_duplicate_pids),
		cmocka_unit_test(test_empty_processes),
		cmocka_unit_test(test_bad_process_list),
		cmocka_unit_test(test_bad_root_pid),
		cmocka_unit_test(test_bad_pid),
		cmocka_unit_test(test_criu_opts),
		cmocka_unit_test(test_bad_criu_opts),
		cmocka_unit_test(test_kind),
		cmocka_unit_test(test_custom_storage),
		cmocka_unit_test(test_cuda_job),
		cmocka_unit_test(test_cuda_nccl),
		cmocka_unit_test(test_custom_segments),
		cmocka_unit_test(test_free_null),
	};

	return cmocka_run_group_tests(tests, unit_ctx_setup, unit_ctx_teardown);
}
