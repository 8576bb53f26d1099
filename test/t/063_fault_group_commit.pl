# Fault suite with group commit gathering large groups
# (group_commit_max_requests = 64, group_commit_max_wait = 5ms): writing
# requests that arrive together run in one transaction and are answered
# after its synchronous commit. The postmaster and every process it started
# are killed with SIGKILL three times amid the load (test/t/QsFault.pm):
# every push answered 201 is stored exactly once (a group's commit is
# durable before any of its answers is sent), nothing that was not
# committed is visible, and the stream's sink and state stay exactly once.
use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use QsFault;
use QsHttp;
use Test::More;

my $node = qs_node('fault_group_commit',
	"queen_streams.group_commit_max_requests = 64\nqueen_streams.group_commit_max_wait = 5ms\n");
fault_run($node,
	faults => [qw(kill9_all kill9_all kill9_all)],
	pushers => 2, stream_pushers => 2, per_pusher => 3000,
	consumers => 2, streamers => 2, pace => 0.05, deadline => 120);
$node->stop;
done_testing();
