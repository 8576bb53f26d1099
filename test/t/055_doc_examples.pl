# Every example of the README and of doc/ runs: each ```sql and ```sh block
# of a page, in page order, against a fresh instance per page (one psql
# session and one bash session per page, so later blocks can use what earlier
# ones set with \gset or a shell variable). A statement that raises, a shell
# command that fails (curl fails on an HTTP status >= 400), or an answer that
# differs from the `-- →` / `# →` lines written after it fails the test. The
# convention is in CONTRIBUTING.md, "Examples in the docs".
use strict;
use warnings;
use utf8;

use FindBin;
use lib $FindBin::RealBin;
use Encode ();
use IPC::Run;
use PostgreSQL::Test::Utils;
use QsHttp;
use Test::More;

# diagnostics carry the pages' text: print it as the bytes it was
sub note_utf8 { diag(Encode::encode_utf8(join '', @_)); }

my @pages = ('README.md', sort glob('doc/*.md'));
# A fence's info string must be one of these: a block that should not run
# says what it is (console, text, conf, js, json) instead of going bare.
my %known = map { $_ => 1 } qw(sql sh console text conf js json);
my $mark = '@@QS-DOC-END@@';
my $chunk_timeout = 300;

# ---- parsing

# The blocks of a page: [{lang, line, chunks => [{text, line, expect}]}];
# a block right after `<!-- doc-test: skip ... -->` is listed as skipped.
sub parse_page
{
	my ($page) = @_;
	open my $fh, '<:encoding(UTF-8)', $page or die "$page: $!";
	my @lines = <$fh>;
	close $fh;
	chomp @lines;
	my (@blocks, @problems);
	my $skip_next = 0;
	for (my $i = 0; $i < @lines; $i++)
	{
		if ($lines[$i] =~ /^<!-- doc-test: skip\b.*-->$/) { $skip_next = 1; next; }
		next unless $lines[$i] =~ /^```(.*)$/;
		my ($info, $start) = ($1, $i + 1);
		my @body;
		for ($i++; $i < @lines && $lines[$i] !~ /^```\s*$/; $i++) { push @body, $lines[$i]; }
		push @problems, "$page:$start: unclosed fence" if $i >= @lines;
		$info =~ s/\s+$//;
		push @problems, "$page:$start: fence without a known info string ('$info')"
		  unless $known{$info};
		if ($info eq 'sql' || $info eq 'sh')
		{
			push @blocks, { lang => $info, line => $start, skip => $skip_next,
				chunks => chunks($info, $start, \@body) };
		}
		$skip_next = 0;
	}
	return (\@blocks, \@problems);
}

# A block cut after each run of expectation lines: every chunk is the code
# since the previous cut and the answer its last statement must give.
sub chunks
{
	my ($lang, $start, $body) = @_;
	my $re = $lang eq 'sql' ? qr/^\s*-- →(?: (.*))?$/ : qr/^\s*# →(?: (.*))?$/;
	my @out;
	my $cur = { text => '', line => $start + 1, expect => undef };
	for my $n (0 .. $#$body)
	{
		my $l = $body->[$n];
		if ($l =~ $re)
		{
			push @{ $cur->{expect} }, $1 // '';
			next;
		}
		if (defined $cur->{expect})
		{
			push @out, $cur;
			$cur = { text => '', line => $start + 1 + $n, expect => undef };
		}
		$cur->{text} .= "$l\n";
	}
	push @out, $cur if $cur->{text} =~ /\S/ || defined $cur->{expect};
	return \@out;
}

# ---- comparing

sub normalize
{
	my ($s) = @_;
	$s =~ s/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/<uuid>/gi;
	$s =~ s/\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d(?::?\d\d)?)?/<ts>/g;
	$s =~ s/\s+/ /g;
	$s =~ s/^ | $//g;
	return $s;
}

# Line by line after normalizing; `…` in an expected line matches any text.
# `(no rows)` alone expects no output.
sub matches
{
	my ($got, $expect) = @_;
	my @g = grep { $_ ne '' } map { normalize($_) } split /\n/, $got;
	my @e = map { normalize($_) } @$expect;
	@e = () if @e == 1 && $e[0] eq '(no rows)';
	return 0 unless @g == @e;
	for my $k (0 .. $#e)
	{
		my $re = join '.*?', map { quotemeta } split /…/, $e[$k], -1;
		return 0 unless $g[$k] =~ /^$re$/s;
	}
	return 1;
}

# ---- running

# A session fed chunk by chunk: returns (stdout, stderr) of one chunk.
sub session
{
	my (@cmd) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $timer = IPC::Run::timer($chunk_timeout);
	my $h = IPC::Run::start(\@cmd, \$in, \$out, \$err, $timer);
	return { h => $h, in => \$in, out => \$out, err => \$err, timer => $timer };
}

sub run_chunk
{
	my ($s, $text, $end) = @_;
	${ $s->{out} } = '';
	${ $s->{err} } = '';
	${ $s->{in} } .= $text . $end;
	$s->{timer}->start($chunk_timeout);
	eval {
		$s->{h}->pump until ${ $s->{out} } =~ /\Q$mark\E\n/;
		1;
	} or return (undef, "session ended or timed out: $@\n" . ${ $s->{err} });
	(my $got = ${ $s->{out} }) =~ s/\n?\Q$mark\E\n.*//s;
	return ($got, ${ $s->{err} });
}

my $skipped = 0;
my $ran = 0;
for my $page (@pages)
{
	my ($blocks, $problems) = parse_page($page);
	is_deeply($problems, [], "$page: every fence is closed and names a known kind");
	my @run = grep { !$_->{skip} } @$blocks;
	$skipped += @$blocks - @run;
	next unless @run;

	(my $name = $page) =~ s/\W+/_/g;
	my $node = qs_node("doc_$name");
	my $port = $node->{qs_http_port};
	local $ENV{PGHOST} = $node->host;
	local $ENV{PGPORT} = $node->port;
	local $ENV{PGDATABASE} = 'postgres';
	my $psql = session('psql', '-X', '-q', '-A', '-t', '-v', 'VERBOSITY=verbose',
		'-d', 'postgres');
	my $bash = session('bash', '--noprofile', '--norc');
	# curl answers an HTTP error with a failure; any failing command is reported
	${ $bash->{in} } .= <<'EOF';
set -o pipefail
curl() { command curl --fail-with-body -sS "$@"; }
trap 'echo "@@QS-DOC-FAILED@@ $BASH_COMMAND" >&2' ERR
EOF

	my $failed_page = 0;
	for my $b (@run)
	{
		for my $c (@{ $b->{chunks} })
		{
			next if $failed_page;
			my $where = "$page:$c->{line} ($b->{lang})";
			my ($got, $err);
			if ($b->{lang} eq 'sql')
			{
				my $code = $c->{text};
				# a chunk must end its statement, or the end mark would run before it
				(my $last = $code) =~ s/--[^\n]*//g;
				$last =~ s/\s+$//;
				if ($code =~ /\S/ && $last !~ /(;|\\g\w*(\s+\S+)?)$/)
				{
					fail("$where: the example ends without ending its statement");
					$failed_page = 1;
					next;
				}
				($got, $err) = run_chunk($psql, $code, "\n\\echo '\\n$mark'\n");
				$err = join "\n", map { s/^psql:[^:]*:\d+: //r } grep { /ERROR:/ } split /\n/, $err // '';
			}
			else
			{
				(my $code = $c->{text}) =~ s{http://127\.0\.0\.1:6632}{http://127.0.0.1:$port}g;
				($got, $err) = run_chunk($bash, $code, "\nprintf '\\n$mark\\n'\n");
				$err = join "\n", grep { /\@\@QS-DOC-FAILED\@\@|^curl: / } split /\n/, $err // '';
			}
			$ran++;
			if (!defined $got)
			{
				fail("$where: runs");
				note_utf8($err);
				$failed_page = 1;
				next;
			}
			# an error is part of the answer: it must be the one written
			my $answer = $got . ($err ne '' ? "\n$err" : '');
			if (defined $c->{expect})
			{
				ok(matches($answer, $c->{expect}), "$where: answers as written")
				  or note_utf8("code:\n$c->{text}\ngot:\n$answer\nexpected:\n"
					  . join("\n", @{ $c->{expect} }));
			}
			else
			{
				is($err, '', "$where: runs without an error")
				  or note_utf8("code:\n$c->{text}\noutput:\n$got");
			}
		}
	}
	$psql->{h}->kill_kill;
	$bash->{h}->kill_kill;
	$node->stop;
}

# not vacuous: the README's tour is there, and the skip marker stays rare
cmp_ok($ran, '>=', 20, "ran $ran example chunks");
cmp_ok($skipped, '<=', 1, "at most one block is skipped ($skipped): the README's first");

done_testing();
