/*
 * json_scan.c: a strict scanner of JSON text for the hot paths, which only
 * need to find where values start and end.
 *
 * It accepts a subset of what PostgreSQL's JSON parser accepts and gives up
 * (returns false) on anything else: a syntax error, a \u escape (whose
 * checks depend on the database encoding), nesting deeper than
 * QS_SCAN_MAX_DEPTH. On text we wrote ourselves (`trusted`: valid JSON, its
 * payloads checked when pushed) \u escapes are skipped and numbers taken
 * as they are. A caller that gets false runs PostgreSQL's parser on
 * the same text, which then accepts it or raises its own error; so the
 * scanner never changes what is accepted, only how fast.
 *
 * Numbers are checked as jsonb input checks them (numeric_in, for the ones
 * that can fail it), in text order and only once the token after them is
 * known to lex, so their error is the parser's too.
 */
#include "common/json.h"

#include "miscadmin.h"
#include "utils/builtins.h"

#define QS_SCAN_MAX_DEPTH 512

/* What may not follow a number or a literal (PostgreSQL's lexer's rule). */
static inline bool
alnum(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		c == '_' || c >= 0x80;
}

static inline bool
digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/*
 * jsonb input turns every number into numeric, which refuses some that
 * JSON's grammar allows (exponents past numeric's range). Only an exponent
 * or a thousand digits can: those go through numeric_in, raising its error.
 */
void
qs_scan_check_number(const char *token, int len)
{
	char	   *t;

	if (len < 1000 && memchr(token, 'e', len) == NULL && memchr(token, 'E', len) == NULL)
		return;
	t = pnstrdup(token, len);
	(void) DirectFunctionCall3(numeric_in, CStringGetDatum(t),
							   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	pfree(t);
}

bool
qs_scan_string(QsScan *s, bool *escaped)
{
	const char *p = s->p + 1;
	const char *end = s->end;

	*escaped = false;
	for (;;)
	{
		p = qs_json_plain_run(p, end);
		if (p >= end)
			return false;
		if (*p == '"')
		{
			s->p = p + 1;
			return true;
		}
		if (*p != '\\' || p + 1 >= end)
			return false;		/* a control character, or a cut escape */
		switch (p[1])
		{
			case '"':
			case '\\':
			case '/':
			case 'b':
			case 'f':
			case 'n':
			case 'r':
			case 't':
				*escaped = true;
				p += 2;
				break;
			case 'u':
				if (!s->trusted || end - p < 6)
					return false;	/* the parser checks it */
				*escaped = true;
				p += 6;
				break;
			default:
				return false;	/* not an escape */
		}
	}
}

static bool
scan_number(QsScan *s)
{
	const char *start = s->p;
	const char *p = s->p;
	const char *end = s->end;

	if (*p == '-')
		p++;
	if (p < end && *p == '0')
		p++;
	else if (p < end && *p >= '1' && *p <= '9')
		while (p < end && digit(*p))
			p++;
	else
		return false;
	if (p < end && *p == '.')
	{
		p++;
		if (p >= end || !digit(*p))
			return false;
		while (p < end && digit(*p))
			p++;
	}
	if (p < end && (*p == 'e' || *p == 'E'))
	{
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (p >= end || !digit(*p))
			return false;
		while (p < end && digit(*p))
			p++;
	}
	if (p < end && alnum(*p))
		return false;
	if (!s->trusted)
	{
		/*
		 * The parser hands a number to jsonb only once it has lexed the next
		 * token, so a bad token right after it is reported instead. Check
		 * here only when that token is ',', '}' or ']', which always lex;
		 * else give up.
		 */
		QsScan		next = {p, end};

		qs_scan_ws(&next);
		if (next.p >= end || (*next.p != ',' && *next.p != '}' && *next.p != ']'))
			return false;
		qs_scan_check_number(start, p - start);
	}
	s->p = p;
	return true;
}

static bool
scan_literal(QsScan *s, const char *word, int len)
{
	if (s->end - s->p < len || memcmp(s->p, word, len) != 0 ||
		(s->end - s->p > len && alnum(s->p[len])))
		return false;
	s->p += len;
	return true;
}

/* A scalar at s->p (not an object or an array). */
static bool
scan_scalar(QsScan *s)
{
	bool		escaped;

	switch (*s->p)
	{
		case '"':
			return qs_scan_string(s, &escaped);
		case 't':
			return scan_literal(s, "true", 4);
		case 'f':
			return scan_literal(s, "false", 5);
		case 'n':
			return scan_literal(s, "null", 4);
		default:
			return scan_number(s);
	}
}

/*
 * Step over one value at s->p (after white space), leaving s->p just past
 * it. Containers are walked with a stack of their closing characters.
 */
bool
qs_scan_skip(QsScan *s)
{
	char		stack[QS_SCAN_MAX_DEPTH];
	int			top = 0;
	bool		escaped;
	const char *key;
	int			klen;

	qs_scan_ws(s);
value:
	if (s->p >= s->end)
		return false;
	if (*s->p == '{' || *s->p == '[')
	{
		if (top == QS_SCAN_MAX_DEPTH)
			return false;
		CHECK_FOR_INTERRUPTS();
		stack[top++] = *s->p == '{' ? '}' : ']';
		s->p++;
		qs_scan_ws(s);
		if (s->p < s->end && *s->p == stack[top - 1])
		{
			s->p++;
			top--;
			goto after;
		}
		if (stack[top - 1] == '}')
			goto key;
		goto value;
	}
	if (!scan_scalar(s))
		return false;
after:
	if (top == 0)
		return true;
	qs_scan_ws(s);
	if (s->p >= s->end)
		return false;
	if (*s->p == ',')
	{
		s->p++;
		qs_scan_ws(s);
		if (stack[top - 1] == ']')
			goto value;
		goto key;
	}
	if (*s->p != stack[top - 1])
		return false;
	s->p++;
	top--;
	goto after;
key:
	if (!qs_scan_key(s, &key, &klen, &escaped))
		return false;
	goto value;
}

/*
 * An object's key and its colon at s->p, leaving s->p at the value: the
 * key's bytes as written (escaped says whether they hold escapes).
 */
bool
qs_scan_key(QsScan *s, const char **key, int *klen, bool *escaped)
{
	if (s->p >= s->end || *s->p != '"')
		return false;
	*key = s->p + 1;
	if (!qs_scan_string(s, escaped))
		return false;
	*klen = s->p - *key - 1;
	qs_scan_ws(s);
	if (s->p >= s->end || *s->p != ':')
		return false;
	s->p++;
	qs_scan_ws(s);
	return true;
}
