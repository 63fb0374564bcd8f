/*
 * lockstep-spank.so — a Slurm SPANK plugin that preloads lockstep's MPI profiler (liblockstep-pmpi.so) into the
 * MPI programs of every job step, so that the agent's `auto` policy counts their MPI calls without users asking
 * for it (docs/policies/auto.md), as sites load their job-level tools.
 *
 * plugstack.conf:
 *
 *   optional /usr/local/lib/lockstep-spank.so profiler=/usr/local/lib/liblockstep-pmpi.so [profiler=…] [default=off]
 *
 * Each profiler= names one build of the profiler; a build serves the programs that link the same MPI library it
 * links (the same libmpi soname in both DT_NEEDED lists: Open MPI's libmpi.so.40, MPICH's libmpi.so.12), and
 * only those: the profiler is compiled against one MPI's ABI, and loaded into a program of another MPI, or into
 * a program that is not an MPI program, it would load a second MPI library. So in each task, just before it
 * executes the step's program, the plugin finds that program (argv[0], along the task's PATH when it has no
 * slash), reads its dynamic section, and prepends the matching build to the task's LD_PRELOAD; a program that
 * links no MPI library, or one that no build matches (a launcher such as `env` or `mpirun`, a script, a program
 * that reaches MPI only through another library), is left as it is. Users turn it off for a job or step with
 * --lockstep-profiler=off (srun, sbatch, salloc); default=off in plugstack.conf makes that the default, and
 * --lockstep-profiler=on asks for it.
 *
 * The plugin runs in the task as the job's user, so it reads only what the user can; it opens the program
 * without blocking, and a file that is not a regular file or not a well-formed 64-bit ELF file is left alone.
 * Nothing it finds fails a job: what it could not do is logged (slurmd's log, and the step's stderr at srun -v).
 */
#include <errno.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(lockstep, 1);

/* The profiler builds that plugstack.conf names, at most this many. */
#define MAX_PROFILERS 4
/* The longest soname read from a dynamic section. */
#define SONAME_MAX 128
/* The most dynamic entries or program headers read from one file. */
#define MAX_DYN 4096
#define MAX_PHDRS 128

/* One build of the profiler: its path and the MPI library it links. */
struct profiler {
	char path[PATH_MAX];
	char mpi[SONAME_MAX];
};

static struct profiler profilers[MAX_PROFILERS];
static int nprofilers;
/* Whether steps get the profiler: the user's option (-1: not given; Slurm may hand it over before or after
 * slurm_spank_init), else plugstack.conf's default. */
static int chosen = -1;
static int site_default = 1;

/* Reads exactly len bytes at off; 0 when it did. */
static int read_at(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = pread(fd, buf, len, off);
	return n == (ssize_t)len ? 0 : -1;
}

/* The file offset of virtual address vaddr in the file's loadable segments, or -1. */
static off_t file_offset(const Elf64_Phdr *ph, int n, uint64_t vaddr)
{
	for (int i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD && vaddr >= ph[i].p_vaddr && vaddr - ph[i].p_vaddr < ph[i].p_filesz)
			return (off_t)(ph[i].p_offset + (vaddr - ph[i].p_vaddr));
	return -1;
}

/* The first MPI library (a soname that begins with "libmpi.so") among the DT_NEEDED entries of the open file fd,
 * copied to mpi: as needed_mpi. */
static int scan_needed(int fd, char mpi[SONAME_MAX])
{
	struct stat st;
	Elf64_Ehdr eh;
	Elf64_Phdr ph[MAX_PHDRS];
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || read_at(fd, &eh, sizeof(eh), 0) != 0)
		return -1;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > MAX_PHDRS ||
	    read_at(fd, ph, eh.e_phnum * sizeof(Elf64_Phdr), (off_t)eh.e_phoff) != 0)
		return -1;
	const Elf64_Phdr *dynamic = NULL;
	for (int i = 0; i < eh.e_phnum; i++)
		if (ph[i].p_type == PT_DYNAMIC)
			dynamic = &ph[i];
	if (!dynamic)
		return 1; /* static: no MPI library to match */
	static Elf64_Dyn dyn[MAX_DYN];
	size_t ndyn = dynamic->p_filesz / sizeof(Elf64_Dyn);
	if (ndyn > MAX_DYN)
		ndyn = MAX_DYN;
	if (read_at(fd, dyn, ndyn * sizeof(Elf64_Dyn), (off_t)dynamic->p_offset) != 0)
		return -1;
	uint64_t strtab = 0, strsz = 0;
	for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
		if (dyn[i].d_tag == DT_STRTAB)
			strtab = dyn[i].d_un.d_ptr;
		else if (dyn[i].d_tag == DT_STRSZ)
			strsz = dyn[i].d_un.d_val;
	}
	off_t strings = file_offset(ph, eh.e_phnum, strtab);
	if (strings < 0)
		return -1;
	for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
		if (dyn[i].d_tag != DT_NEEDED || dyn[i].d_un.d_val >= strsz)
			continue;
		char name[SONAME_MAX] = { 0 };
		size_t len = strsz - dyn[i].d_un.d_val;
		if (len > sizeof(name) - 1)
			len = sizeof(name) - 1;
		if (pread(fd, name, len, strings + (off_t)dyn[i].d_un.d_val) <= 0)
			continue;
		if (strncmp(name, "libmpi.so", 9) == 0) {
			memcpy(mpi, name, sizeof(name));
			return 0;
		}
	}
	return 1;
}

/*
 * Finds, among the DT_NEEDED entries of the ELF file at path, the first MPI library (a soname that begins with
 * "libmpi.so"), and copies it to mpi. Returns 0 when found, 1 when the file links none, -1 when it is not a
 * readable regular 64-bit ELF file with a well-formed dynamic section.
 */
static int needed_mpi(const char *path, char mpi[SONAME_MAX])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -1;
	int found = scan_needed(fd, mpi);
	close(fd);
	return found;
}

/* The path of the program a task executes: argv0 itself when it has a slash, else its first executable regular
 * file along path (the task's PATH). Returns 0 and fills out, or -1. */
static int program_path(const char *argv0, const char *path, char out[PATH_MAX])
{
	if (strchr(argv0, '/'))
		return snprintf(out, PATH_MAX, "%s", argv0) < PATH_MAX ? 0 : -1;
	for (const char *dir = path; dir; dir = strchr(dir, ':') ? strchr(dir, ':') + 1 : NULL) {
		size_t len = strcspn(dir, ":");
		struct stat st;
		/* An empty entry is the current directory, as execvp reads it. */
		if (snprintf(out, PATH_MAX, "%.*s%s%s", (int)len, dir, len ? "/" : "", argv0) >= PATH_MAX)
			continue;
		if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
			return 0;
	}
	return -1;
}

/* --lockstep-profiler=on|off. */
static int profiler_option(int val, const char *optarg, int remote)
{
	(void)val;
	(void)remote;
	if (optarg && strcmp(optarg, "on") == 0)
		chosen = 1;
	else if (optarg && strcmp(optarg, "off") == 0)
		chosen = 0;
	else {
		slurm_error("lockstep: --lockstep-profiler=%s not understood (expected on or off)", optarg ? optarg : "");
		return -1;
	}
	return 0;
}

static struct spank_option option = {
	"lockstep-profiler", "on|off",
	"Preload lockstep's MPI profiler into the step's MPI programs, so that the node agent's auto policy counts "
	"their MPI calls (the site's default is usually on)",
	1, 0, profiler_option,
};

/* Registers the user's option (srun, sbatch, salloc and slurmstepd all need it) and, on the node, reads
 * plugstack.conf's arguments. An argument it does not understand turns the plugin off, with an error in slurmd's
 * log: a site's mistake never fails its users' jobs. */
int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (spank_option_register(sp, &option) != ESPANK_SUCCESS)
		slurm_error("lockstep: cannot register --%s", option.name);
	nprofilers = 0;
	if (!spank_remote(sp))
		return 0;
	for (int i = 0; i < ac; i++) {
		if (strncmp(av[i], "profiler=", 9) == 0 && nprofilers < MAX_PROFILERS && av[i][9] == '/' &&
		    strlen(av[i] + 9) < PATH_MAX) {
			struct profiler *p = &profilers[nprofilers];
			strcpy(p->path, av[i] + 9);
			if (needed_mpi(p->path, p->mpi) != 0) {
				slurm_error("lockstep: profiler=%s is not a readable profiler that links an MPI library "
					    "(libmpi.so.*); left out",
					    p->path);
				continue;
			}
			nprofilers++;
		} else if (strcmp(av[i], "default=on") == 0) {
			site_default = 1;
		} else if (strcmp(av[i], "default=off") == 0) {
			site_default = 0;
		} else {
			slurm_error("lockstep: plugstack.conf argument '%s' not understood (expected profiler=/PATH, at "
				    "most %d, or default=on|off); the profiler is not preloaded",
				    av[i], MAX_PROFILERS);
			nprofilers = 0;
			break;
		}
	}
	return 0;
}

/* In each task, just before it executes the program: preloads the matching profiler build, if any. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if ((chosen >= 0 ? !chosen : !site_default) || nprofilers == 0)
		return 0;
	int argc = 0;
	char **argv = NULL;
	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv[0])
		return 0;
	char path[PATH_MAX] = "", program[PATH_MAX], mpi[SONAME_MAX];
	if (!strchr(argv[0], '/') && spank_getenv(sp, "PATH", path, sizeof(path)) != ESPANK_SUCCESS)
		return 0;
	if (program_path(argv[0], path, program) != 0 || needed_mpi(program, mpi) != 0)
		return 0;
	const struct profiler *match = NULL;
	for (int i = 0; i < nprofilers && !match; i++)
		if (strcmp(profilers[i].mpi, mpi) == 0)
			match = &profilers[i];
	if (!match) {
		slurm_verbose("lockstep: %s links %s, which no profiler build links; not preloaded", program, mpi);
		return 0;
	}
	/* Prepended to what the user preloads, once. */
	char preload[4096] = "", value[4096 + PATH_MAX + 1];
	spank_err_t got = spank_getenv(sp, "LD_PRELOAD", preload, sizeof(preload));
	if (got != ESPANK_SUCCESS && got != ESPANK_ENV_NOEXIST) {
		slurm_error("lockstep: cannot read the task's LD_PRELOAD; the profiler is not preloaded");
		return 0;
	}
	if (strstr(preload, match->path))
		return 0;
	snprintf(value, sizeof(value), "%s%s%s", match->path, *preload ? " " : "", preload);
	if (spank_setenv(sp, "LD_PRELOAD", value, 1) != ESPANK_SUCCESS)
		slurm_error("lockstep: cannot set the task's LD_PRELOAD; the profiler is not preloaded");
	else
		slurm_verbose("lockstep: %s (%s) runs with %s", program, mpi, match->path);
	return 0;
}
