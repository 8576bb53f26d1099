-- Schema of one benchmark database: the extension, and the row-per-message
-- baseline tables shaped like pgmq's queue tables (pgmq.create()).
CREATE EXTENSION queen_streams;
CREATE SCHEMA bench;
CREATE TABLE bench.q_push (
	msg_id bigserial PRIMARY KEY,
	read_ct int NOT NULL DEFAULT 0,
	enqueued_at timestamptz NOT NULL DEFAULT now(),
	vt timestamptz NOT NULL,
	message jsonb
);
CREATE INDEX q_push_vt_idx ON bench.q_push (vt);
CREATE TABLE bench.q_pop (LIKE bench.q_push INCLUDING ALL);
-- LIKE ... INCLUDING ALL shares q_push's sequence: give q_pop its own.
CREATE SEQUENCE bench.q_pop_msg_id_seq OWNED BY bench.q_pop.msg_id;
ALTER TABLE bench.q_pop ALTER COLUMN msg_id SET DEFAULT nextval('bench.q_pop_msg_id_seq');
