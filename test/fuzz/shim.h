/*
 * shim.h: what the fuzz harnesses need to run backend code with no server.
 *
 * palloc and friends allocate from a per-input arena that fuzz_reset() frees;
 * ereport(ERROR) longjmps back to the harness through fuzz_try(). A small
 * jsonb stand-in (jsonb_in, getKeyJsonValueFromContainer, ...) is built on
 * PostgreSQL's own JSON parser from libpgcommon, with numeric_in's limits.
 */
#ifndef QS_FUZZ_SHIM_H
#define QS_FUZZ_SHIM_H

#include "postgres.h"

#include <setjmp.h>

/* ereport(ERROR) goes where PG_TRY (or fuzz_try) last set it */
#define fuzz_jmp PG_exception_stack
extern int	fuzz_last_sqlstate;
extern char fuzz_last_message[512];

/* Free everything palloc'd since the last reset. */
extern void fuzz_reset(void);

/*
 * Run `body`; evaluates to true when it returned normally, false when it
 * raised an ERROR (fuzz_last_sqlstate / fuzz_last_message say what).
 */
#define fuzz_try(body) \
	({ \
		sigjmp_buf	fuzz_local_; \
		sigjmp_buf *fuzz_saved_ = fuzz_jmp; \
		bool		fuzz_ok_; \
		if (sigsetjmp(fuzz_local_, 0) == 0) \
		{ \
			fuzz_jmp = &fuzz_local_; \
			body; \
			fuzz_ok_ = true; \
		} \
		else \
			fuzz_ok_ = false; \
		fuzz_jmp = fuzz_saved_; \
		fuzz_ok_; \
	})

/* The jsonb stand-in: parse JSON text, raising 22P02 as jsonb_in would. */
struct Jsonb;
extern struct Jsonb *fuzz_jsonb(const char *text);

#endif
