# Fault suite with queen_streams.group_flush = on: commits are flushed once
# for all the requests a worker holds, and answered only after that flush.
# The postmaster and every process it started are killed with SIGKILL three
# times amid the load (test/t/QsFault.pm), so commits that were visible but
# not yet flushed are lost: no push answered 201 may be among them, and the
# stream's sink and state stay exactly once.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsFault;
use QsHttp;
use Test::More;

my $node = qs_node('fault_group_flush', "queen_streams.group_flush = on\n");
fault_run($node,
	faults => [qw(kill9_all kill9_all kill9_all)],
	pushers => 2, stream_pushers => 2, per_pusher => 3000,
	consumers => 2, streamers => 2, pace => 0.05, deadline => 120);
$node->stop;
done_testing();
