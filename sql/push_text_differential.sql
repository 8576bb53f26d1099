-- queen.push_text against queen.push(text::jsonb) on 20,000 generated
-- requests: valid ones with white space, escapes and odd numbers in them, and
-- mutated ones (a character inserted, dropped, copied or replaced). Both must
-- give the same answer (ids aside) or the same error. The scanner behind
-- push_text's fast pass gives up on what it does not know, so a difference
-- means it accepted, refused or ordered an error unlike jsonb input. Both
-- entries share one reader (push_text.c): queen.push reads the text jsonb
-- writes, so a difference also means that text reads unlike the original.
-- Deterministic: setseed() fixes the requests.
CREATE EXTENSION queen_streams;

CREATE FUNCTION pg_temp.pick(a text[]) RETURNS text LANGUAGE sql VOLATILE AS
$$ SELECT a[1 + floor(random() * array_length(a, 1))::int] $$;

\i test/include/push_both.sql

CREATE FUNCTION pg_temp.value() RETURNS text LANGUAGE sql VOLATILE AS $$
	SELECT pg_temp.pick(ARRAY['{}', '[]', '1', '-0', '0.5e3', '"s"', 'null', 'true', 'false',
		'{"a":[1,2,{"b":"c\"d"}]}', '"\u00e9"', '"\ud83d\ude00"', '"\u0000"', '"\ud800"', '"tab\tnl\n"',
		'1e400', '-1E-400', '1e999999', '123456789012345678901234567890', '"é漢字😀"', '{"a":1,"a":2}',
		'[[[[[]]]]]', '"\/"', '1.0', '0', '"\b\f\r"', '{"":""}', '-', '1.', '.5', '01', '1e', '1e+',
		'-01', '1E5', '0e0', '-0.0e-0', '2E+3', '+1', 'NaN', 'Infinity', 'tru', 'truex', '1a', '"\x"',
		'"\u12"', '"\uDC00x"', E'"\t"', E'"\x7f"', '"\U0041"', '{"k":}', '{,}', '[1,]', '[,1]',
		'{"a" 1}', '{"a":1,}', repeat('[', 40) || repeat(']', 40), repeat('1', 1200),
		'1e' || repeat('9', 20), '{"\u0069tems":1}']) $$;

CREATE FUNCTION pg_temp.item() RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	f text[] := '{}';
BEGIN
	IF random() < 0.95 THEN
		f := f || ('"queue":' || pg_temp.pick(ARRAY['"q"', '"q2"', '""', 'null', '1', '"q\u0041"',
			'"a b"', '"q/x"', '"' || repeat('x', 300) || '"', '"é"']));
	END IF;
	IF random() < 0.5 THEN
		f := f || ('"partition":' || pg_temp.pick(ARRAY['"p"', '"Default"', 'null', '""', '2', '"p\"x"', '"😀"']));
	END IF;
	IF random() < 0.5 THEN
		f := f || ('"transactionId":' || pg_temp.pick(ARRAY['"t1"', '"t2"', '""', 'null', '5', '"t\u0031"',
			'"' || repeat('y', 600) || '"']));
	END IF;
	IF random() < 0.2 THEN
		f := f || ('"traceId":' || pg_temp.pick(ARRAY['"0190c0de-0000-7000-8000-000000000000"', '"nope"', 'null', '1']));
	END IF;
	IF random() < 0.9 THEN
		f := f || ('"payload":' || pg_temp.value());
	END IF;
	IF random() < 0.2 THEN
		f := f || ('"data":' || pg_temp.value());
	END IF;
	IF random() < 0.1 THEN
		f := f || ('"extra":' || pg_temp.value());
	END IF;
	RETURN '{' || (SELECT coalesce(string_agg(x, ',' ORDER BY random()), '') FROM unnest(f) x) || '}';
END $$;

CREATE FUNCTION pg_temp.request() RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	s text := '"items":[' ||
		(SELECT coalesce(string_agg(pg_temp.item(), ','), '') FROM generate_series(1, floor(random() * 6)::int)) || ']';
	k float8 := random();
	i int;
BEGIN
	IF random() < 0.1 THEN
		s := s || ',"items":' || pg_temp.pick(ARRAY['null', '{}', '[]', '1', '[' || pg_temp.item() || ']']);
	END IF;
	IF random() < 0.1 THEN
		s := '"other":' || pg_temp.value() || ',' || s;
	END IF;
	s := '{' || s || '}';
	IF k < 0.35 THEN
		-- one to three edits
		FOR n IN 1 .. 1 + floor(random() * 3)::int LOOP
			i := floor(random() * (length(s) + 1))::int;
			k := random();
			IF k < 0.4 THEN
				s := overlay(s PLACING pg_temp.pick(ARRAY['{', '}', '[', ']', '"', ',', ':', '\', ' ',
					E'\t', E'\n', '0', '9', 'e', 'E', '+', '-', '.', 't', 'n', '/', 'é', E'\x01', E'\x1f',
					'\u', '\ud83d', '\"', 'true', 'null', '1e99999', '😀', U&'\2028']) FROM i + 1 FOR 0);
			ELSIF k < 0.7 THEN
				s := overlay(s PLACING '' FROM i + 1 FOR 1);
			ELSIF k < 0.85 THEN
				s := overlay(s PLACING substr(s, floor(random() * length(s))::int + 1,
					1 + floor(random() * 10)::int) FROM i + 1 FOR 0);
			ELSE
				s := overlay(s PLACING pg_temp.pick(ARRAY['{', '}', ']', '"', ',', ':', '\', 'x', '1'])
					FROM i + 1 FOR 1);
			END IF;
		END LOOP;
	ELSIF k < 0.6 THEN
		-- white space, JSON's and not
		s := regexp_replace(s, '([{}\[\],:])', '\1' || pg_temp.pick(ARRAY[' ', E'\t', E'\n', E'\r', '  ',
			E'\f', E'\v', U&'\00a0', E'\r\n', '', '', '']), 'g');
	ELSIF k < 0.7 THEN
		s := replace(s, '"items"', pg_temp.pick(ARRAY['"\u0069tems"', '"item\u0073"', '"ite\/ms"', '"Items"']));
	ELSIF k < 0.75 THEN
		s := replace(s, '"queue"', pg_temp.pick(ARRAY['"qu\u0065ue"', '"Queue"']));
	END IF;
	RETURN s;
END $$;

SELECT setseed(0.25);
CREATE TEMP TABLE cases AS SELECT n, pg_temp.request() AS t FROM generate_series(1, 20000) n;
CREATE TEMP TABLE outcomes AS SELECT n, t, pg_temp.both(t) AS r FROM cases;

-- what the requests exercised
SELECT CASE WHEN r = 'same: []' THEN 'ok, no items'
			WHEN r ~ '^same: [0-9A-Z]{5}: ' THEN 'err ' || substr(r, 7, 5)
			WHEN r LIKE 'same: %' THEN 'ok, items'
			ELSE 'differ' END AS outcome,
	   count(*) > 50 AS over_50
  FROM outcomes GROUP BY 1 ORDER BY 1;

-- the differences: none
SELECT n, t, r FROM outcomes WHERE r NOT LIKE 'same: %' ORDER BY n;

DROP EXTENSION queen_streams CASCADE;
