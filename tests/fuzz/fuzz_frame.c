/*
 * fuzz_frame: the bytes are frames of the exchange between gpusend and
 * gpurecv, back to back: each 16-byte header is checked with
 * gck_frame_unpack() and the JSON of each control frame parsed with
 * gck_frame_parse(), as both ends do with what the other sends.
 */
#include "config.h"

#include <jansson.h>

#include "private.h"
#include "transport/frame.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gck_frame	 f;
	struct gck_ctx		*ctx;
	unsigned char		 hdr[GCK_FRAME_HDR];
	json_t			*o;
	size_t			 len;

	if ((ctx = gck_ctx_new()) == NULL)
		abort();
	while (size >= GCK_FRAME_HDR) {
		if (gck_frame_unpack(ctx, data, &f, "fuzz") != GCK_OK) {
			if (gck_error_string(ctx) == NULL)
				abort();
			/* A resynchronising reader would try the next byte. */
			data++;
			size--;
			continue;
		}
		/* What comes out of a valid header packs back the same. */
		gck_frame_pack(hdr, f.type, f.len, f.seq);
		if (memcmp(hdr, data, GCK_FRAME_HDR) != 0)
			abort();
		data += GCK_FRAME_HDR;
		size -= GCK_FRAME_HDR;
		len = f.len < size ? f.len : size;
		if (f.type != GCK_F_DATA && (o = gck_frame_parse(ctx,
		    (const char *)data, len, "fuzz")) != NULL) {
			(void)json_integer_value(json_object_get(o, "offset"));
			(void)json_string_value(json_object_get(o, "error"));
			json_decref(o);
		}
		data += len;
		size -= len;
	}
	gck_ctx_free(ctx);
	return 0;
}
