# Fault suite: an HTTP worker terminated (pg_terminate_backend) four times,
# alternating between the two, amid concurrent HTTP pushes, pops with acks
# and stream cycles; the postmaster restarts the worker, clients retry.
# The same checks as 060: exactly once in the log, the sink and the state;
# no lease left stuck.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsFault;
use QsHttp;
use Test::More;

my $node = qs_node('fault_worker');
fault_run($node,
	faults => [qw(terminate_worker terminate_worker terminate_worker terminate_worker)],
	pushers => 2, stream_pushers => 2, per_pusher => 3000,
	consumers => 2, streamers => 2, pace => 0.1, deadline => 120);
$node->stop;
done_testing();
