/*
 * secret_file.c: secrets read from files (queen_streams.jwt_secret_file,
 * queen_streams.encryption_key_file) instead of inline settings, which
 * PostgreSQL writes to the server log when a reload changes them.
 *
 * The file is read by the setting's check hook, so in every process that
 * loads the configuration: at start and on each SIGHUP (a rotated secret is
 * picked up by a reload even when the path stays the same). Its contents
 * travel as the setting's "extra", which the GUC machinery keeps and frees;
 * they never appear in a message. A file that is missing, unreadable, not a
 * regular file, open to group or world (the rules of PostgreSQL's
 * ssl_key_file), empty or malformed makes the value invalid: PostgreSQL logs
 * the path and why, and keeps the previous value (and contents) on a reload.
 */
#include "common/guc.h"
#include "common/ids.h"
#include "common/jwt.h"

#include "utils/guc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET_FILE_MAX 65536

/* What the assign hooks installed: the file's secret, or NULL when unset. */
static const char *jwt_file_secret = NULL;
static const char *encryption_file_key = NULL;

/* Secret bytes do not outlive their use in freed memory. */
static void
wipe_free(char *p, size_t n)
{
	explicit_bzero(p, n);
	free(p);
}

/*
 * Read a secret file into malloc'd memory, less trailing newlines.
 * False, with the detail set for GUC, when it cannot be used.
 */
static bool
read_secret_file(const char *path, char **out)
{
	struct stat st;
	int			fd;
	char	   *buf;
	ssize_t		n = 0;

	*out = NULL;
	/* O_NONBLOCK: a FIFO must not hang the postmaster; a regular file ignores it */
	fd = open(path, O_RDONLY | O_NONBLOCK | PG_BINARY | O_CLOEXEC, 0);
	if (fd < 0)
	{
		GUC_check_errdetail("Could not open the file: %m.");
		return false;
	}
	/* fstat on the open file: the checked file is the one read */
	if (fstat(fd, &st) != 0)
	{
		GUC_check_errdetail("Could not stat the file: %m.");
		close(fd);
		return false;
	}
	if (!S_ISREG(st.st_mode))
	{
		GUC_check_errdetail("The file is not a regular file.");
		close(fd);
		return false;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0)
	{
		GUC_check_errdetail("The file must be owned by the database user or root.");
		close(fd);
		return false;
	}
	/* as PostgreSQL asks of ssl_key_file: 0600 if ours, 0640 if root's */
	if ((st.st_uid == geteuid() && (st.st_mode & (S_IRWXG | S_IRWXO))) ||
		(st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IXGRP | S_IRWXO))))
	{
		GUC_check_errdetail("The file has group or world access; it must have permissions u=rw (0600) or less "
							"if owned by the database user, or u=rw,g=r (0640) or less if owned by root.");
		close(fd);
		return false;
	}
	if (st.st_size > SECRET_FILE_MAX)
	{
		GUC_check_errdetail("The file is larger than %d bytes.", SECRET_FILE_MAX);
		close(fd);
		return false;
	}
	/* malloc, not palloc: the GUC machinery frees a setting's extra with free() */
	buf = malloc(SECRET_FILE_MAX + 1);
	if (buf == NULL)
	{
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		GUC_check_errdetail("Out of memory.");
		close(fd);
		return false;
	}
	for (;;)
	{
		ssize_t		r = read(fd, buf + n, SECRET_FILE_MAX + 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
		{
			GUC_check_errdetail("Could not read the file: %m.");
			close(fd);
			wipe_free(buf, SECRET_FILE_MAX + 1);
			return false;
		}
		if (r == 0 || (n += r) > SECRET_FILE_MAX)
			break;
	}
	close(fd);
	if (n > SECRET_FILE_MAX)
	{
		GUC_check_errdetail("The file is larger than %d bytes.", SECRET_FILE_MAX);
		wipe_free(buf, SECRET_FILE_MAX + 1);
		return false;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	buf[n] = '\0';
	if (n == 0)
	{
		GUC_check_errdetail("The file is empty.");
		wipe_free(buf, SECRET_FILE_MAX + 1);
		return false;
	}
	if ((ssize_t) strlen(buf) != n)
	{
		GUC_check_errdetail("The file holds a zero byte.");
		wipe_free(buf, SECRET_FILE_MAX + 1);
		return false;
	}
	/* keep only what the file held: the GUC machinery keeps this while the value lives */
	*out = strdup(buf);
	explicit_bzero(buf, n);
	free(buf);
	if (*out == NULL)
	{
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		GUC_check_errdetail("Out of memory.");
		return false;
	}
	return true;
}

bool
qs_check_jwt_secret_file(char **newval, void **extra, GucSource source)
{
	char	   *secret;

	*extra = NULL;
	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!read_secret_file(*newval, &secret))
		return false;
	*extra = secret;
	return true;
}

void
qs_assign_jwt_secret_file(const char *newval, void *extra)
{
	jwt_file_secret = extra;
}

bool
qs_check_encryption_key_file(char **newval, void **extra, GucSource source)
{
	char	   *key;
	size_t		len;

	*extra = NULL;
	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!read_secret_file(*newval, &key))
		return false;
	/* checked here, so a bad key is named at reload rather than at a push */
	len = strlen(key);
	while (len > 0 && (key[len - 1] == ' ' || key[len - 1] == '\t'))
		key[--len] = '\0';
	for (size_t i = 0; i < len; i++)
		if (qs_hexval(key[i]) < 0)
			len = 0;
	if (len != 64)
	{
		GUC_check_errdetail("The file must hold the key as 64 hexadecimal digits.");
		wipe_free(key, strlen(key));
		return false;
	}
	*extra = key;
	return true;
}

void
qs_assign_encryption_key_file(const char *newval, void *extra)
{
	encryption_file_key = extra;
}

/* The HS256 secret: the file's when jwt_secret_file is set, else jwt_secret; NULL if none. */
const char *
qs_jwt_hmac_secret(void)
{
	if (jwt_file_secret != NULL)
		return jwt_file_secret;
	if (qs_jwt_secret != NULL && qs_jwt_secret[0] != '\0')
		return qs_jwt_secret;
	return NULL;
}

/* The encryption key text: the file's, else encryption_key; NULL if neither. */
const char *
qs_encryption_key_text(void)
{
	if (encryption_file_key != NULL)
		return encryption_file_key;
	if (qs_encryption_key != NULL && qs_encryption_key[0] != '\0')
		return qs_encryption_key;
	return NULL;
}
