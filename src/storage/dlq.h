/*
 * dlq.h: what dlq.c shares with traces.c: whether a transaction id is in a
 * partition's log (through the hash sidecar), and the message routes'
 * argument pair.
 */
#ifndef QS_DLQ_H
#define QS_DLQ_H

#include "storage/storage.h"

typedef enum QsTxnPresence
{
	QS_TXN_NO_PARTITION,		/* unknown partition, or another tenant's */
	QS_TXN_ABSENT,				/* the hashes cover every live offset: not there */
	QS_TXN_UNKNOWN,				/* not among the newest hashes; older ones unchecked */
	QS_TXN_FOUND
} QsTxnPresence;

/* Inside SPI. */
extern QsTxnPresence qs_txn_presence(const pg_uuid_t *tenant, const pg_uuid_t *pid,
									 const char *txn);

/* The required (partition uuid, transaction id text) pair of the message routes. */
extern char *qs_message_args(FunctionCallInfo fcinfo, pg_uuid_t *pid);

#endif							/* QS_DLQ_H */
