/*
 * fuzz_recv: the bytes gpusend sends to gpurecv, as gck_recv() stores
 * an image: the START frame and its JSON, the data frames and the image
 * in them (verified as it comes), END and its JSON, or ABORT.  A first
 * byte with its low bit set asks for a resumed send, and a 16-bit
 * little-endian length and that many bytes of a partial image held from
 * before follow it.  The directory the image goes to is emptied after
 * each input.
 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>

#include "gpuckpt.h"
#include "fuzz.h"

static char	*dir;
static int	 null = -1;

static void
cleanup(void)
{
	if (dir != NULL)
		fuzz_rmdir(dir);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gck_recv_opts	 o;
	struct gck_recv_result	 res;
	struct gck_ctx		*ctx;
	char			 path[4096];
	size_t			 len;
	int			 fd, in, r, resume = 0;

	if (dir == NULL) {
		/* As gpurecv: a pipe whose reader has gone fails a write. */
		signal(SIGPIPE, SIG_IGN);
		dir = fuzz_tmpdir("recv");
		atexit(cleanup);
		if ((null = open("/dev/null", O_WRONLY | O_CLOEXEC)) == -1)
			abort();
	}
	if (size > 0 && data[0] & 1) {
		resume = 1;
		len = size >= 3 ? (size_t)data[1] | (size_t)data[2] << 8 : 0;
		data += size >= 3 ? 3 : size;
		size -= size >= 3 ? 3 : size;
		if (len > size)
			len = size;
		snprintf(path, sizeof path, "%s/.img.gpurecv-part", dir);
		if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		    0600)) == -1 || write(fd, data, len) != (ssize_t)len)
			abort();
		close(fd);
		data += len;
		size -= len;
	} else if (size > 0) {
		data++;
		size--;
	}
	if ((ctx = gck_ctx_new()) == NULL)
		abort();
	in = fuzz_memfd(data, size);
	snprintf(path, sizeof path, "%s/img", dir);
	memset(&o, 0, sizeof o);
	o.mode = GCK_RECV_STORE;
	o.infd = in;
	o.outfd = null;
	o.id = "0123456789abcdef0123456789abcdef";
	o.streams = 1;
	o.path = path;
	o.resume = resume;
	o.timeout_ms = 1000;
	r = gck_recv(ctx, &o, &res);
	fuzz_say("recv", r, gck_error_string(ctx));
	if (r == GCK_OK && res.stored == NULL)
		abort();
	free(res.stored);
	close(in);
	gck_ctx_free(ctx);
	fuzz_empty(dir);
	return 0;
}
