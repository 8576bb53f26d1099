# Fault suite: the postmaster killed with SIGKILL three times (twice together
# with every process it started, as a power cut would, once alone), each amid
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

my $node = qs_node('fault_kill');
fault_run($node,
	faults => [qw(kill9_all kill9 kill9_all)],
	pushers => 3, stream_pushers => 2, per_pusher => 4000,
	consumers => 2, streamers => 2, pace => 0.05, deadline => 150);
$node->stop;
done_testing();
