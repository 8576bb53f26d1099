#!/usr/bin/perl
# Writes one family of push pgbench scripts for the benchmark: VARIANTS payload
# sets of 100 messages each, as queen.push requests or as the row-per-message
# baseline INSERT carrying the very same 100 payloads.
#
#   perl gen_push.pl OUTDIR NAME MODE TARGET [VARIANTS]
#
# MODE    spread  queen.push, all 100 items on one partition; one file per
#                 (variant, partition p-0..p-15), so pgbench picks the
#                 partition at random per transaction by picking a file
#         mixed   queen.push, the 100 items spread over p-0..p-15 (~6 per segment)
#         one     queen.push, every batch on the partition "Default"
#         notxn   as spread, but without transactionId (queen skips the dedup probe)
#         base    INSERT of the 100 payloads as 100 rows into bench.TARGET
#                 (pgmq's send_batch: INSERT ... SELECT clock_timestamp(), unnest(jsonb[]))
# TARGET  the queue name (queen modes) or the table name (base)
#
# Files: OUTDIR/NAME.<variant>.<partition>.sql. Payloads are small, varied JSON
# events (~100-200 bytes: orders, payments, sign-ups, shipments, sensor
# readings, page views), fixed per variant: every segment is compressed on its
# own, so repeating a batch's content across batches does not flatter zstd.
# transactionIds must never repeat (the dedup window would answer "duplicate"
# and write nothing): they are "tx-:k16_digits_wide-<i>" with one pgbench
# variable,
#   \set n :n + 1   and   \set k16_digits_wide 10^15 + :n * 1000 + :client_id
# so run every invocation with its own -D n=<base> (bases 1e9 apart, below
# 10^12). The placeholder is as long as its value (16 characters): pgbench
# then overwrites it in place, where a shorter one makes it move the rest of
# the 25 kB query text (and measure it twice) at each of the 100
# substitutions, client CPU that the INSERT and floor scripts, which have
# no variables, never pay.
use strict;
use warnings;

my ($out, $name, $mode, $target, $variants) = @ARGV;
die "usage: $0 OUTDIR NAME spread|mixed|one|notxn|base TARGET [VARIANTS]\n"
	unless defined $target && -d $out && $mode =~ /^(spread|mixed|one|notxn|base)$/;
$variants ||= 4;
my $BATCH = 100;
my $PARTS = 16;

my @first = qw(anna ben carla dev emil fatima gus hana ivan julia kofi lena
	milo nadia omar priya quinn rosa sven tara);
my @last = qw(smith mueller rossi tanaka novak silva kim dubois larsen okafor
	garcia nguyen haddad jensen moreau);
my @city = (['Berlin', 52.52, 13.405], ['Lisbon', 38.722, -9.139],
	['Osaka', 34.693, 135.502], ['Austin', 30.267, -97.743],
	['Nairobi', -1.292, 36.822], ['Oslo', 59.913, 10.752]);
my @carrier = qw(DHL UPS FedEx PostNL GLS);
my @ship = qw(label_created picked_up in_transit out_for_delivery delivered);
my @plan = qw(free starter pro team enterprise);
my @ref = qw(newsletter search ads partner direct podcast);
my @locale = qw(en-US de-DE fr-FR pt-PT ja-JP es-ES);
my @method = qw(card sepa paypal apple_pay ideal);
my @cur = qw(EUR USD GBP JPY CHF);
my @path = qw(/ /pricing /docs/getting-started /products /cart /checkout /blog/queues);
my @ua = ('Mozilla/5.0 (X11; Linux x86_64) Firefox/131.0',
	'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) Safari/605.1.15',
	'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4) Mobile/15E148',
	'okhttp/4.12.0');

sub pick { my $a = shift; return $a->[int(rand(@$a))]; }
sub money { return sprintf('%.2f', 1 + rand(400)); }

# One payload; `$k` (item index) keeps ids unique inside a batch.
sub payload
{
	my ($k) = @_;
	my $uid = sprintf('%d-%d', int(rand(1e6)), $k);
	my $t = int(rand(6));
	if ($t == 0)
	{
		my @items;
		for (1 .. 1 + int(rand(3)))
		{
			push @items, sprintf('{"sku":"SKU-%04d","qty":%d,"price":%s}',
				int(rand(10000)), 1 + int(rand(4)), money());
		}
		return sprintf('{"type":"order.created","orderId":"ord-%s","customerId":%d,'
			. '"items":[%s],"currency":"%s"}',
			$uid, int(rand(900000)) + 1000, join(',', @items), pick(\@cur));
	}
	if ($t == 1)
	{
		return sprintf('{"type":"payment.captured","paymentId":"pay-%s","orderId":"ord-%d",'
			. '"amount":%s,"currency":"%s","method":"%s","last4":"%04d","attempt":%d}',
			$uid, int(rand(9000000)), money(), pick(\@cur), pick(\@method),
			int(rand(10000)), 1 + int(rand(2)));
	}
	if ($t == 2)
	{
		my ($f, $l) = (pick(\@first), pick(\@last));
		return sprintf('{"type":"user.signup","userId":"u-%s","email":"%s.%s%d@example.com",'
			. '"name":"%s %s","plan":"%s","referrer":"%s","locale":"%s","marketing":%s}',
			$uid, $f, $l, int(rand(100)), ucfirst($f), ucfirst($l), pick(\@plan),
			pick(\@ref), pick(\@locale), rand() < 0.5 ? 'true' : 'false');
	}
	if ($t == 3)
	{
		my $c = pick(\@city);
		return sprintf('{"type":"shipment.updated","shipmentId":"shp-%s","carrier":"%s",'
			. '"status":"%s","eta":"2025-12-%02dT%02d:00:00Z",'
			. '"location":{"city":"%s","lat":%.3f,"lon":%.3f}}',
			$uid, pick(\@carrier), pick(\@ship), 1 + int(rand(28)), int(rand(24)),
			$c->[0], $c->[1] + rand(0.1), $c->[2] + rand(0.1));
	}
	if ($t == 4)
	{
		return sprintf('{"type":"sensor.reading","deviceId":"dev-%04d","seq":"%s",'
			. '"temp":%.1f,"humidity":%d,"battery":%.2f,"fw":"2.%d.%d","alarms":[]}',
			int(rand(5000)), $uid, 15 + rand(15), 20 + int(rand(60)), rand(),
			int(rand(5)), int(rand(10)));
	}
	return sprintf('{"type":"page.view","sessionId":"s-%s","path":"%s","ua":"%s",'
		. '"ms":%d,"status":200}',
		$uid, pick(\@path), pick(\@ua), 20 + int(rand(900)));
}

sub write_file
{
	my ($file, $text) = @_;
	open(my $fh, '>', "$out/$file") or die "$out/$file: $!\n";
	print $fh $text;
	close($fh) or die "$out/$file: $!\n";
}

my $counter = "\\set n :n + 1\n\\set k16_digits_wide 1000000000000000 + :n * 1000 + :client_id\n";
for my $v (1 .. $variants)
{
	srand(7919 * $v + 17);
	my @p = map { payload($_) } 0 .. $BATCH - 1;
	my $head = "-- generated by bench/gen_push.pl ($mode, variant $v): 100 messages, one transaction\n";

	if ($mode eq 'base')
	{
		write_file("$name.$v.0.sql", $head
			. "INSERT INTO bench.$target (vt, message) SELECT clock_timestamp(), m FROM unnest(ARRAY["
			. join(',', map { "'$_'" } @p) . "]::jsonb[]) AS m RETURNING msg_id;\n");
		next;
	}
	my $request = sub
	{
		my ($part, $txn) = @_;
		my @it;
		for my $k (0 .. $BATCH - 1)
		{
			my $pj = defined $part ? sprintf('"partition":"%s",', $part->($k)) : '';
			my $tj = $txn ? "\"transactionId\":\"tx-:k16_digits_wide-$k\"," : '';
			push @it, sprintf('{"queue":"%s",%s%s"payload":%s}', $target, $pj, $tj, $p[$k]);
		}
		return "SELECT queen.push('{\"items\":[" . join(',', @it) . "]}'::jsonb);\n";
	};
	if ($mode eq 'mixed')
	{
		write_file("$name.$v.0.sql", $head . $counter . $request->(sub { 'p-' . ($_[0] % $PARTS) }, 1));
	}
	elsif ($mode eq 'one')
	{
		write_file("$name.$v.0.sql", $head . $counter . $request->(undef, 1));
	}
	else
	{
		for my $part (0 .. $PARTS - 1)
		{
			write_file("$name.$v.$part.sql", $head . ($mode eq 'notxn' ? '' : $counter)
				. $request->(sub { "p-$part" }, $mode ne 'notxn'));
		}
	}
}
