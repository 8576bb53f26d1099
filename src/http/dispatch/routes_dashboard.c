/*
 * routes_dashboard.c: GET /, /dashboard and /dashboard/:file serve the
 * operator's dashboard, a single page of static HTML, CSS and JavaScript
 * (src/http/dashboard/) compiled into the library by the Makefile
 * (dashboard_assets.c). No transaction, no extension needed: the page
 * itself is public; everything it shows it reads from the JSON routes, with
 * the caller's token and tenant. Nothing is fetched from anywhere else, and
 * the Content-Security-Policy says so to the browser.
 */
#include "http/dispatch/route.h"

/* dashboard_assets.c, generated from src/http/dashboard/ */
extern const unsigned char qs_dash_index_html[];
extern const unsigned int qs_dash_index_html_len;
extern const unsigned char qs_dash_app_js[];
extern const unsigned int qs_dash_app_js_len;
extern const unsigned char qs_dash_app_css[];
extern const unsigned int qs_dash_app_css_len;

#define QS_DASHBOARD_CSP \
	"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; " \
	"frame-ancestors 'none'"

typedef struct Asset
{
	const char *name;
	const char *content_type;
	const unsigned char *data;
	const unsigned int *len;
} Asset;

static const Asset assets[] = {
	{"index.html", "text/html; charset=utf-8", qs_dash_index_html, &qs_dash_index_html_len},
	{"app.js", "text/javascript; charset=utf-8", qs_dash_app_js, &qs_dash_app_js_len},
	{"app.css", "text/css; charset=utf-8", qs_dash_app_css, &qs_dash_app_css_len},
};

static void
dashboard_run(QsReq *req)
{
	const char *file = req->arg ? req->arg : "index.html";

	for (int i = 0; i < (int) lengthof(assets); i++)
	{
		if (strcmp(assets[i].name, file) != 0)
			continue;
		req->status = 200;
		req->content_type = assets[i].content_type;
		/* compiled in: the same bytes until the library changes; revalidate */
		req->cache_control = "no-cache";
		req->csp = QS_DASHBOARD_CSP;
		req->resp = (char *) assets[i].data;
		req->resp_len = (int) *assets[i].len;
		return;
	}
	qs_http_error(req, 404, "not found");
}

const QsRouteDef qs_route_dashboard = {NULL, dashboard_run, NULL, "dashboard failed", false, false};
