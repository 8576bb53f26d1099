/*
 * transport.h: the transport half of the listener: the worker's loop
 * (worker.c), libmicrohttpd's glue and the balancing of connections
 * (daemon.c), the screen in front of it (screen.c), and connection limits
 * and deadlines (limits.c). Transport calls dispatch (dispatch/dispatch.h),
 * never the other way round.
 */
#ifndef QS_HTTP_TRANSPORT_H
#define QS_HTTP_TRANSPORT_H

#include "http/request.h"

#include <sys/socket.h>

struct sockaddr;

/* ---------------------------------------------------------------- daemon.c */
extern bool qs_http_daemon_start(void);
extern int	qs_http_daemon_fd(void);
extern int	qs_http_listen_fd(void);
extern int	qs_http_handoff_fd(void);
extern bool qs_http_accept(bool take_new);
/* send what dispatch handed back, then let libmicrohttpd read and write */
extern void qs_http_daemon_run(void);
extern long qs_http_daemon_timeout(void);

/* ---------------------------------------------------------------- screen.c */
/* where a connection whose head passed goes (daemon.c: to libmicrohttpd) */
typedef void (*QsScreenPass) (int fd, const struct sockaddr *addr, socklen_t len);
extern void qs_screen_init(QsScreenPass pass);
extern int	qs_screen_fd(void);
extern void qs_screen_add(int fd, const struct sockaddr *addr, socklen_t len);
extern void qs_screen_out_of_fds(int listener);
extern void qs_screen_write_answer(int fd, int status, const char *message, bool retry);
extern void qs_screen_linger_dup(int fd);
extern void qs_screen_run(void);
extern long qs_screen_timeout(void);

/* ---------------------------------------------------------------- limits.c */
extern void qs_conn_opened(QsConn *c);
extern void qs_conn_closed(QsConn *c);
extern void qs_conn_phase(QsConn *c, QsPhase phase);
extern void qs_limits_sweep(void);
extern long qs_limits_timeout(void);
extern int	qs_request_header_bytes(struct MHD_Connection *mhd, const char *url);
extern size_t qs_http_pool_size(void);

#endif							/* QS_HTTP_TRANSPORT_H */
