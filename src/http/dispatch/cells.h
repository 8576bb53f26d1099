/*
 * cells.h: the listener on a router database in front of cells (cells.c,
 * doc/deploying.md).
 */
#ifndef QS_HTTP_CELLS_H
#define QS_HTTP_CELLS_H

#include "http/request.h"

#include "utils/jsonb.h"

extern bool qs_cells_is_router;
extern Oid	qs_cells_extension_oid(void);
extern char *qs_cells_partition_queue(const pg_uuid_t *tenant, const pg_uuid_t *pid);
extern void qs_cells_pushed(QsReq *req, Jsonb *results);
extern const char *qs_cells_remote_message(const char *message);
extern void qs_cells_body_starts(QsReq *req);
extern bool qs_cells_outcome_unknown(QsReq *req, ErrorData *edata);
extern void qs_cells_answer_unknown(QsReq *req, const char *failed);

#endif							/* QS_HTTP_CELLS_H */
