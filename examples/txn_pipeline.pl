#!/usr/bin/perl
# txn_pipeline.pl: a transactional pipeline over HTTP only, as a program
# written against Queen does it: pop a leased batch from one queue, derive
# one message per input, and push the results to another queue and ack the
# inputs in ONE POST /api/v1/transaction. Either both happen or neither.
#
#   pop a leased batch   GET  /api/v1/pop/queue/<source>?consumerGroup=<group>&wait=true
#   push + ack at once   POST /api/v1/transaction
#                        {"operations":[{"type":"push","items":[...]},
#                                       {"type":"ack","transactionId":...,"partitionId":...}, ...],
#                         "requiredLeases":[<leaseId>]}
#
# Each output carries a transactionId derived from its input's, so a
# transaction retried after a lost answer cannot push twice: its pushes come
# back "duplicate" and its acks fail (the inputs are already acked), which
# rolls the retry back whole. A crash before a commit leaves the lease to
# expire and the batch to come back. Outputs are exactly once.
#
# The derivation here: payload {"n": N, ...} becomes {"n": N, "square": N*N,
# "source": <input transactionId>}.
#
# Only core Perl modules: HTTP::Tiny, JSON::PP.
use strict;
use warnings;

use Getopt::Long;
use HTTP::Tiny;
use JSON::PP;
use Time::HiRes qw(time sleep);

my %o = (
	url => 'http://127.0.0.1:6632',
	source => 'numbers',
	sink => 'squares',
	group => 'squarer',
	batch => 50,
	wait => 1000,			# long-poll timeout, ms
	'exit-idle' => 0,		# exit after this many idle seconds (0: run forever)
	tenant => undef,
	verbose => 0,
);
GetOptions(\%o, 'url=s', 'source=s', 'sink=s', 'group=s', 'batch=i', 'wait=i',
	'exit-idle=f', 'tenant=s', 'verbose!')
  or die "usage: $0 [--url U] [--source Q] [--sink Q] [--group G] [--batch N] [--exit-idle S]\n";

my $json = JSON::PP->new->utf8->canonical;
my $http = HTTP::Tiny->new(timeout => 60, keep_alive => 1);
my %headers = ('content-type' => 'application/json');
$headers{'x-queen-tenant'} = $o{tenant} if $o{tenant};

sub say_ { print STDERR "txn_pipeline: @_\n" if $o{verbose} }

# One request; 5xx and network errors are retried with backoff, as Queen's
# clients do (a retried transaction is safe, see above).
sub call
{
	my ($method, $path, $body) = @_;
	my $delay = 0.1;
	for my $try (1 .. 6)
	{
		my $r = $http->request($method, "$o{url}$path",
			{ headers => \%headers, defined $body ? (content => $json->encode($body)) : () });
		return ($r->{status}, length $r->{content} ? $json->decode($r->{content}) : undef)
		  if $r->{status} < 500 || $try == 6;
		say_("$method $path: $r->{status}, retrying");
		sleep $delay;
		$delay *= 2;
	}
}

my $idle_since = time;
my ($batches, $out) = (0, 0);
while (1)
{
	my ($st, $pop) = call('GET', "/api/v1/pop/queue/$o{source}?batch=$o{batch}"
		  . "&consumerGroup=$o{group}&wait=true&timeout=$o{wait}");
	die "pop: HTTP $st\n" if $st != 200 && $st != 204;
	if ($st == 204)
	{
		last if $o{'exit-idle'} > 0 && time - $idle_since >= $o{'exit-idle'};
		next;
	}
	$idle_since = time;

	my @msgs = @{ $pop->{messages} };
	my @items = map {
		my $n = $_->{data}{n} // 0;
		{ queue => $o{sink}, partition => $_->{partition}, transactionId => "$_->{transactionId}.sq",
		  payload => { n => $n, square => $n * $n, source => $_->{transactionId} } }
	} @msgs;
	my @acks = map {
		{ type => 'ack', transactionId => $_->{transactionId}, partitionId => $_->{partitionId},
		  status => 'completed', consumerGroup => $o{group} }
	} @msgs;
	my ($tst, $res) = call('POST', '/api/v1/transaction',
		{ operations => [ { type => 'push', items => \@items }, @acks ],
		  requiredLeases => [ $pop->{leaseId} ] });
	if ($tst != 200 || !$res->{success})
	{
		# nothing was written; the lease expires and the batch comes back
		say_("transaction rolled back: " . ($res->{error} // "HTTP $tst"));
		next;
	}
	$batches++;
	$out += @items;
	say_("batch $batches: " . scalar(@items) . " messages");
}
say_("done: $batches batches, $out messages");
