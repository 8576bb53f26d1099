-- Consumer groups (facts §4): list, lagging partitions, details, delete,
-- subscription update and seeks over queen.log_consumers.
\echo Use "ALTER EXTENSION queen_streams UPDATE TO '0.2.0'" to load this file. \quit

-- One group's cursor rows without reading every group's (details, delete).
CREATE INDEX log_consumers_group_idx ON queen.log_consumers (consumer_group);

CREATE FUNCTION queen.consumer_groups(tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_consumer_groups' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.consumer_groups(uuid) IS
	'every (group, queue) with members, lag and subscription (GET /api/v1/consumer-groups)';

CREATE FUNCTION queen.consumer_groups_lagging(min_lag_seconds int DEFAULT 3600, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_consumer_groups_lagging' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.consumer_groups_lagging(int, uuid) IS
	'partitions whose oldest unconsumed message is older than min_lag_seconds, largest lag first (GET /api/v1/consumer-groups/lagging)';

CREATE FUNCTION queen.consumer_group(consumer_group text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_consumer_group' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.consumer_group(text, uuid) IS
	'one group''s partitions keyed by queue name, {} when unknown (GET /api/v1/consumer-groups/:group)';

CREATE FUNCTION queen.delete_consumer_group(consumer_group text, queue text DEFAULT NULL,
	delete_metadata boolean DEFAULT true, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_delete_consumer_group' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.delete_consumer_group(text, text, boolean, uuid) IS
	'delete a group''s cursors (and subscription) on every queue or one (DELETE /api/v1/consumer-groups/:group[/queues/:queue])';

CREATE FUNCTION queen.update_subscription(consumer_group text, request jsonb, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_update_subscription' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.update_subscription(text, jsonb, uuid) IS
	'set the subscription timestamp of a group''s new/timestamp subscriptions (POST /api/v1/consumer-groups/:group/subscription)';

CREATE FUNCTION queen.seek(consumer_group text, queue text, request jsonb, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_seek' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.seek(text, text, jsonb, uuid) IS
	'move a group''s cursors on a queue to the end or to a timestamp, releasing leases (POST /api/v1/consumer-groups/:group/queues/:queue/seek)';

CREATE FUNCTION queen.seek_partition(consumer_group text, queue text, partition text, tenant uuid DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'qs_seek_partition' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION queen.seek_partition(text, text, text, uuid) IS
	'move a group''s cursor on one partition to its end, releasing the lease (POST .../queues/:queue/partitions/:partition/seek)';

REVOKE EXECUTE ON FUNCTION
	queen.consumer_groups(uuid),
	queen.consumer_groups_lagging(int, uuid),
	queen.consumer_group(text, uuid),
	queen.delete_consumer_group(text, text, boolean, uuid),
	queen.update_subscription(text, jsonb, uuid),
	queen.seek(text, text, jsonb, uuid),
	queen.seek_partition(text, text, text, uuid)
	FROM PUBLIC;

ALTER FUNCTION queen.consumer_groups(uuid)
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION queen.consumer_groups_lagging(int, uuid)
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION queen.consumer_group(text, uuid)
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION queen.delete_consumer_group(text, text, boolean, uuid)
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION queen.update_subscription(text, jsonb, uuid)
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION queen.seek(text, text, jsonb, uuid)
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION queen.seek_partition(text, text, text, uuid)
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
