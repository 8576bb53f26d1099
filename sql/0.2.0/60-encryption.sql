-- Encryption fails closed and decrypts only flagged data: a dead letter of an
-- encrypted frame keeps the frame's envelope, and says so here, so no
-- plaintext lands in a table; queen.dlq and queen.retry_message open it.
\echo Use "ALTER EXTENSION queen_streams UPDATE TO '0.2.0'" to load this file. \quit

ALTER TABLE queen.log_dlq ADD COLUMN encrypted boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN queen.log_dlq.encrypted IS
	'payload is the AES-256-GCM envelope of a frame flagged ENCRYPTED, decrypted where it is read';
