# Fault suite: the server stopped with `pg_ctl stop -m immediate` (SIGQUIT:
# every process quits at once, no checkpoint) three times, each amid
# concurrent HTTP pushes, pops with acks and stream cycles (test/t/QsFault.pm);
# clients retry as Queen's do. Afterwards every acknowledged push is stored
# exactly once, every stream source message is in the sink and the state
# exactly once, and no lease is left stuck.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsFault;
use QsHttp;
use Test::More;

my $node = qs_node('fault_immediate');
fault_run($node,
	faults => [qw(immediate immediate immediate)],
	pushers => 2, stream_pushers => 2, per_pusher => 3000,
	consumers => 2, streamers => 2, pace => 0.1, deadline => 120);
$node->stop;
done_testing();
