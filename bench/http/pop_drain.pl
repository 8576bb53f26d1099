#!/usr/bin/perl
# pop_drain.pl: Queen's client shape over HTTP, for bench/pop_partitions.sh:
# C keep-alive connections (one forked process each), each popping one
# message at a time (GET /api/v1/pop/queue/Q?batch=1, no wait) and acking it
# (POST /api/v1/ack), until the queue answers 204 three times in a row to a
# connection or `seconds` pass. Prints: messages acked, seconds from the
# first request to the last answer, and acked messages per second.
#
#   perl pop_drain.pl PORT QUEUE CONNS SECONDS [GROUP]
use strict;
use warnings;
use HTTP::Tiny;
use JSON::PP;
use POSIX ();
use Time::HiRes qw(time);

my ($port, $queue, $conns, $seconds, $group) = @ARGV;
die "usage: pop_drain.pl PORT QUEUE CONNS SECONDS [GROUP]\n" unless $seconds;
my $json = JSON::PP->new->utf8;
my $base = "http://127.0.0.1:$port";
my $q = "/api/v1/pop/queue/$queue?batch=1" . ($group ? "&consumerGroup=$group" : '');
pipe(my $rd, my $wr) or die "pipe: $!";
my $start = time;
my $stop_at = $start + $seconds;
my @kids;
for my $k (1 .. $conns)
{
	my $pid = fork // die "fork: $!";
	if ($pid == 0)
	{
		close $rd;
		my $ua = HTTP::Tiny->new(timeout => 30, keep_alive => 1);
		my ($acked, $empty, $last) = (0, 0, time);
		while ($empty < 3 && time < $stop_at)
		{
			my $r = $ua->get("$base$q");
			$last = time;
			if ($r->{status} == 204) { $empty++; next; }
			die "pop answered $r->{status}: $r->{content}\n" unless $r->{status} == 200;
			$empty = 0;
			my $d = $json->decode($r->{content});
			for my $m (@{ $d->{messages} })
			{
				my $a = $ua->post("$base/api/v1/ack", { headers => { 'content-type' => 'application/json' },
					content => $json->encode({ transactionId => $m->{transactionId},
						partitionId => $m->{partitionId}, leaseId => $m->{leaseId},
						$group ? (consumerGroup => $group) : () }) });
				$last = time;
				$acked++ if $a->{status} == 200;
			}
		}
		print $wr "$acked $last\n";
		close $wr;
		POSIX::_exit(0);
	}
	push @kids, $pid;
}
close $wr;
my ($acked, $last) = (0, $start);
while (my $l = <$rd>)
{
	my ($n, $t) = split ' ', $l;
	$acked += $n;
	$last = $t if $t > $last;
}
waitpid($_, 0) for @kids;
my $secs = $last - $start;
printf "%d %.2f %.0f\n", $acked, $secs, $secs > 0 ? $acked / $secs : 0;
