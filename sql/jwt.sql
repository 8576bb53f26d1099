-- Bearer tokens: HS256 and RS256 verification, claims and algorithm rules.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS queen_streams;
CREATE EXTENSION IF NOT EXISTS pgcrypto;
RESET client_min_messages;

CREATE FUNCTION pg_temp.b64url(b bytea) RETURNS text LANGUAGE sql
AS $$ SELECT rtrim(translate(encode(b, 'base64'), E'+/\n', '-_'), '=') $$;
-- An HS256 token signed with `secret`.
CREATE FUNCTION pg_temp.hs(header jsonb, payload jsonb, secret text) RETURNS text LANGUAGE sql
AS $$
  SELECT s || '.' || pg_temp.b64url(hmac(s, secret, 'sha256'))
    FROM (SELECT pg_temp.b64url(convert_to(header::text, 'UTF8')) || '.' ||
                 pg_temp.b64url(convert_to(payload::text, 'UTF8')) AS s) t
$$;
CREATE FUNCTION pg_temp.claims(exp_in int) RETURNS jsonb LANGUAGE sql
AS $$ SELECT jsonb_build_object('sub', 'svc-a', 'role', 'read-write',
                                  'exp', extract(epoch FROM now())::int + exp_in) $$;

-- No key configured: nothing verifies.
SELECT queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}', pg_temp.claims(60), 's3cret'));

SET queen_streams.jwt_secret = 's3cret';
-- valid, with sub and role
SELECT queen_streams.verify_token(pg_temp.hs('{"alg":"HS256","typ":"JWT"}', pg_temp.claims(60), 's3cret'));
-- every role, and a missing or unknown one (valid token, no access)
SELECT r, queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}', jsonb_build_object('role', r), 's3cret'))->>'role' AS level
  FROM unnest(ARRAY['read-only', 'read-write', 'admin', 'write-only', 'root']) r;
SELECT queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}', '{"sub":"x"}', 's3cret'));
-- expired beyond the leeway, and within it
SELECT queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}', pg_temp.claims(-120), 's3cret'))->>'error' AS expired;
SELECT queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}', pg_temp.claims(-5), 's3cret'))->>'valid' AS within_leeway;
-- not yet valid
SELECT queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}',
       jsonb_build_object('role', 'admin', 'nbf', extract(epoch FROM now())::int + 300), 's3cret'))->>'error' AS nbf;
-- nbf, iat and exp must be numbers (RFC 7519 NumericDate), a string one fails
SELECT c, queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}', '{"role":"admin"}'::jsonb || c, 's3cret'))->>'error' AS numeric_date
  FROM unnest(ARRAY['{"nbf":"1700000000"}', '{"iat":"1700000000"}', '{"exp":"4102444800"}', '{"nbf":true}',
                    '{"iat":null}', '{"nbf":1700000000,"iat":1700000000}']::jsonb[]) c;
-- a crit header (RFC 7515 4.1.11: we process no extension, so none is understood)
SELECT h, queen_streams.verify_token(pg_temp.hs(h, '{"role":"admin"}', 's3cret'))->>'error' AS crit
  FROM unnest(ARRAY['{"alg":"HS256","crit":["exp"],"exp":1}', '{"alg":"HS256","crit":[]}',
                    '{"alg":"HS256","crit":"b64"}']::jsonb[]) h;
-- wrong signature; a tampered payload
SELECT queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}', pg_temp.claims(60), 'other'))->>'error' AS wrong_key;
SELECT queen_streams.verify_token(
  split_part(t, '.', 1) || '.' || pg_temp.b64url(convert_to('{"role":"admin"}', 'UTF8')) || '.' || split_part(t, '.', 3))->>'error' AS tampered
  FROM (SELECT pg_temp.hs('{"alg":"HS256"}', '{"role":"read-only"}', 's3cret') t) s;
-- alg none, unsigned, and an algorithm we do not take
SELECT queen_streams.verify_token(pg_temp.b64url('{"alg":"none"}') || '.' || pg_temp.b64url('{"role":"admin"}') || '.')->>'error' AS alg_none;
SELECT queen_streams.verify_token(pg_temp.hs('{"alg":"HS512"}', '{"role":"admin"}', 's3cret'))->>'error' AS hs512;
-- an RS256 token while only an HMAC secret is configured
SELECT queen_streams.verify_token('eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJyc2Etc3ZjIiwicm9sZSI6ImFkbWluIiwiZXhwIjo0MTAyNDQ0ODAwfQ.BFJupjOyeBLrXvsKutLbyueGy_4uNrLDTo8KsTASOaiVRMgYvrKa8nuRDsLP9BjyQJvQl1BJqLJ3qLlwjyhGmZhC2-3-tDrzQJg9Fc8aXOSYk6SG0tEUyb5AokmfFcansz9kUjhPLGFGzH3gP3u8Yw0U3FlCTpGIBxC2BjChNRHb9KvmK3z-CI2ABVvSI6tSjH74LD-CUDfHOp4stDR2OGPvkLz4qsmBatxiEgDTKDAdm62087q2eJ9yoUCLR06bBNKqVhZ8UrBOVVPDHhWrBO65aJfVIYCwd5ZfZSXqs81YEZzLIInmU534xAbn6Rl4F3OMlgRuW2Om-o5GuvWjFA')->>'error' AS rs256_with_secret;
-- malformed input never raises
SELECT queen_streams.verify_token(t)->>'error' AS malformed
  FROM unnest(ARRAY['', 'abc', 'a.b', 'a.b.c.d', '!!.??.##',
                    pg_temp.b64url('{"alg":"HS256"}') || '.' || pg_temp.b64url('not json') || '.x',
                    pg_temp.b64url('[1]') || '.' || pg_temp.b64url('{}') || '.x']) t;
-- hostile JSON inside a correctly signed token: a 401 reason, never an error
SELECT queen_streams.verify_token(pg_temp.b64url(convert_to(h, 'UTF8')) || '.' || pg_temp.b64url(convert_to(p, 'UTF8'))
         || '.' || pg_temp.b64url(hmac(pg_temp.b64url(convert_to(h, 'UTF8')) || '.' || pg_temp.b64url(convert_to(p, 'UTF8')),
                                       's3cret', 'sha256')))->>'error' AS hostile
  FROM (VALUES ('{"alg":"HS256","x":1e999999999}', '{"role":"admin"}'),
               ('{"alg":"HS256"}', '{"role":"admin","exp":1e999999999}'),
               ('{"alg":"HS256"}', '{"role":"admin","nbf":-1e999999999,"exp":"soon"}'),
               ('{"alg":"HS256","alg":"none"}', '{"role":"admin"}'),
               ('{"alg":"HS256"}', '{"role":"read-only","role":"admin"}'),
               ('{"alg":"HS256"}', '{"s":"\ud800"}'),
               ('{"alg":"HS256"}', '{"role":"admin"} x')) v(h, p);
-- the JSON parser's own errors (here: stack depth) are caught inside token parsing
CREATE TEMP TABLE deep AS
  SELECT pg_temp.hs('{"alg":"HS256"}', ('{"a":' || repeat('[', 4000) || repeat(']', 4000) || '}')::jsonb, 's3cret') t;
SET max_stack_depth = '100kB';
SELECT length(t) < 16384 AS within_length, queen_streams.verify_token(t)->>'error' AS deep FROM deep;
RESET max_stack_depth;
SELECT queen_streams.verify_token(t)->>'valid' AS deep_with_room FROM deep;

-- required claims: exp, iss, aud (a string or an array), all off by default
SET queen_streams.jwt_require_exp = on;
SELECT queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}', '{"role":"admin"}', 's3cret'))->>'error' AS no_exp;
SELECT queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}', pg_temp.claims(60), 's3cret'))->>'valid' AS with_exp;
RESET queen_streams.jwt_require_exp;
SET queen_streams.jwt_issuer = 'https://issuer.example';
SELECT i, queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}', pg_temp.claims(60) || i, 's3cret'))->>'error' AS iss
  FROM unnest(ARRAY['{}', '{"iss":"https://issuer.example"}', '{"iss":"https://other"}', '{"iss":1}']::jsonb[]) i;
RESET queen_streams.jwt_issuer;
SET queen_streams.jwt_audience = 'queen';
SELECT a, queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}', pg_temp.claims(60) || a, 's3cret'))->>'error' AS aud
  FROM unnest(ARRAY['{}', '{"aud":"queen"}', '{"aud":["a","queen"]}', '{"aud":["a"]}', '{"aud":"queenx"}',
                    '{"aud":[["queen"]]}']::jsonb[]) a;
RESET queen_streams.jwt_audience;
-- the tenant claim is reported when configured
SET queen_streams.jwt_tenant_claim = 'tid';
SELECT queen_streams.verify_token(pg_temp.hs('{"alg":"HS256"}',
       pg_temp.claims(60) || '{"tid":"11111111-1111-4111-8111-111111111111"}', 's3cret'));
RESET queen_streams.jwt_tenant_claim;

-- RS256 with a public key file.
RESET queen_streams.jwt_secret;
CREATE TEMP TABLE pem (n serial, line text);
INSERT INTO pem (line) VALUES
  ('-----BEGIN PUBLIC KEY-----'),
  ('MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu/Y8FBSCOSWYNEFkyrKe'),
  ('PaPmmL/3bvy/TKohwnn04gTg3SNOegi9bWZGb7HeKJjq2uAb3X+y2QEG8+z2Yuxk'),
  ('ttZTWtT4CfiO2y2nfgDPclY5effFBlMhVadtE3i8BK3zEQBfoOxLGeRNaFaJMbB7'),
  ('HcAjEZiKLScC6DyBwrrqbEVyhU+XmDjeKk839DUWM5+OReQbF6V0WibMZLmtSg/j'),
  ('TKpwr42KhchCcBp6ZCnvZ/0wzjt+is3kAfyLho8m0rEtGeKv4XQT0reJOky77GId'),
  ('WbuEMxLH54h7w9KG8rtrA9rt1f5SVi81n4KrJAMY5ZwpwJv/Zo2oyzrVSPn1k6FZ'),
  ('KwIDAQAB'),
  ('-----END PUBLIC KEY-----');
COPY (SELECT line FROM pem ORDER BY n) TO '/tmp/queen_streams_regress_pub.pem';
SET queen_streams.jwt_public_key_file = '/tmp/queen_streams_regress_pub.pem';
SELECT queen_streams.verify_token('eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJyc2Etc3ZjIiwicm9sZSI6ImFkbWluIiwiZXhwIjo0MTAyNDQ0ODAwfQ.BFJupjOyeBLrXvsKutLbyueGy_4uNrLDTo8KsTASOaiVRMgYvrKa8nuRDsLP9BjyQJvQl1BJqLJ3qLlwjyhGmZhC2-3-tDrzQJg9Fc8aXOSYk6SG0tEUyb5AokmfFcansz9kUjhPLGFGzH3gP3u8Yw0U3FlCTpGIBxC2BjChNRHb9KvmK3z-CI2ABVvSI6tSjH74LD-CUDfHOp4stDR2OGPvkLz4qsmBatxiEgDTKDAdm62087q2eJ9yoUCLR06bBNKqVhZ8UrBOVVPDHhWrBO65aJfVIYCwd5ZfZSXqs81YEZzLIInmU534xAbn6Rl4F3OMlgRuW2Om-o5GuvWjFA');
SELECT queen_streams.verify_token('eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyc2Etc3ZjIiwicm9sZSI6ImFkbWluIiwiZXhwIjoxMDAwMDAwMDAwfQ.CPZWJMNuuiJI-xIIIj8f6RHBhv0wGCaAtk-CAYedyhuJtk8jqzqBooda85wpHAGSIzO4y_WuMzodpXGynhcZsmOYRdj3ePiPyGRsSXbwLwmdS1SynsuT9Yf1PpC1spsEcwTSdXKLJtwEQBo7TSMdnwPphJ-67t29TrBnyOVIkhimjCcUxnC_-e5jFtvsy7umHx5zcJlaVviY9nxlSxfr8PkpkJXRJfxWWesD4aOTdtSmnTIK0Sm9TQED_7qSGb_KV9HLe1820jpkRrIxIbcxXDYLCDeieCCmJxX0j_H3MBfoO3UI5kYXtO5bIiVHUL9qsbsPRm9tFENd4kYRvXbqkQ')->>'error' AS rs256_expired;
-- a flipped signature byte
SELECT queen_streams.verify_token(overlay(t placing CASE WHEN substr(t, length(t) - 10, 1) = 'A' THEN 'B' ELSE 'A' END
                                  from length(t) - 10 for 1))->>'error' AS rs256_bad_sig
  FROM (SELECT 'eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJyc2Etc3ZjIiwicm9sZSI6ImFkbWluIiwiZXhwIjo0MTAyNDQ0ODAwfQ.BFJupjOyeBLrXvsKutLbyueGy_4uNrLDTo8KsTASOaiVRMgYvrKa8nuRDsLP9BjyQJvQl1BJqLJ3qLlwjyhGmZhC2-3-tDrzQJg9Fc8aXOSYk6SG0tEUyb5AokmfFcansz9kUjhPLGFGzH3gP3u8Yw0U3FlCTpGIBxC2BjChNRHb9KvmK3z-CI2ABVvSI6tSjH74LD-CUDfHOp4stDR2OGPvkLz4qsmBatxiEgDTKDAdm62087q2eJ9yoUCLR06bBNKqVhZ8UrBOVVPDHhWrBO65aJfVIYCwd5ZfZSXqs81YEZzLIInmU534xAbn6Rl4F3OMlgRuW2Om-o5GuvWjFA'::text AS t) s;
-- algorithm confusion: HS256 "signed" with the public key as the HMAC secret
SELECT queen_streams.verify_token('eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJldmlsIiwicm9sZSI6ImFkbWluIn0._7JdT_o2uZjJcs7GZlpVcZfe0v1yMoBQCX9Ikhr6G10')->>'error' AS confusion;
SET queen_streams.jwt_public_key_file = '/nonexistent/key.pem';
SELECT queen_streams.verify_token('eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJyc2Etc3ZjIiwicm9sZSI6ImFkbWluIiwiZXhwIjo0MTAyNDQ0ODAwfQ.BFJupjOyeBLrXvsKutLbyueGy_4uNrLDTo8KsTASOaiVRMgYvrKa8nuRDsLP9BjyQJvQl1BJqLJ3qLlwjyhGmZhC2-3-tDrzQJg9Fc8aXOSYk6SG0tEUyb5AokmfFcansz9kUjhPLGFGzH3gP3u8Yw0U3FlCTpGIBxC2BjChNRHb9KvmK3z-CI2ABVvSI6tSjH74LD-CUDfHOp4stDR2OGPvkLz4qsmBatxiEgDTKDAdm62087q2eJ9yoUCLR06bBNKqVhZ8UrBOVVPDHhWrBO65aJfVIYCwd5ZfZSXqs81YEZzLIInmU534xAbn6Rl4F3OMlgRuW2Om-o5GuvWjFA')->>'error' AS missing_key_file;
RESET queen_streams.jwt_public_key_file;

-- The key settings are hidden from and closed to non-superusers.
CREATE ROLE jwt_nobody;
GRANT EXECUTE ON FUNCTION queen_streams.verify_token(text) TO jwt_nobody;
SET ROLE jwt_nobody;
SHOW queen_streams.jwt_secret;
SET queen_streams.jwt_secret = 'mine';
SHOW queen_streams.jwt_secret_file;
SHOW queen_streams.encryption_key_file;
SET queen_streams.jwt_tenant_claim = 'tid';
RESET ROLE;
DROP OWNED BY jwt_nobody;
DROP ROLE jwt_nobody;

DROP EXTENSION pgcrypto;
DROP EXTENSION queen_streams CASCADE;
