/*
 * resources.h: what resources.c and messages.c (the admin read routes)
 * share: Queen's bucket time format, argument checks and partition counts.
 */
#ifndef QS_RESOURCES_H
#define QS_RESOURCES_H

#include "storage/storage.h"
#include "common/json.h"

/* Whole seconds, YYYY-MM-DDTHH:MI:SSZ (Queen's throughput bucket stamps). */
extern void qsr_time_s(QsJson *j, const char *key, TimestampTz ts);

/* The required queue name argument (400 when missing). */
extern char *qsr_queue_arg(FunctionCallInfo fcinfo, int argno);

/* resources.c: per-partition counts from offsets and cursors */
typedef struct Counts
{
	int64		total,
				pending,
				processing,
				completed,
				failed,
				dead;
} Counts;

typedef struct PartRow
{
	pg_uuid_t	qid;
	char	   *queue,
			   *ns,
			   *task;
	TimestampTz q_created;
	int			priority,
				lease_time,
				retry_limit,
				retry_delay,
				ttl,
				max_queue_size;
	bool		dlq;
	bool		has_part;
	pg_uuid_t	pid;
	char	   *partition;
	TimestampTz p_created;
	bool		has_newest,
				has_oldest,
				has_activity;
	TimestampTz newest,
				oldest,
				activity;
	Counts		c;
	int64		consumed;
} PartRow;

extern int	qsr_load_parts(const pg_uuid_t *tenant, const char *queue, const char *ns,
						   const char *task, int lim, int off, PartRow **out);
extern void qsr_counts_add(Counts *sum, const Counts *c);
extern int	qsr_queue_group(PartRow *rows, int n, int from, int *to, Counts *sum);
extern void qsr_write_counts(QsJson *j, const char *key, const Counts *c, bool flat);

#endif							/* QS_RESOURCES_H */
