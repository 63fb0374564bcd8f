# A Spack package of lockstep (Spack v1 repository layout, api v2.2): add this repository with
# `spack repo add packaging/spack/spack_repo/lockstep`, then build and install the checkout with
# `spack dev-build lockstep@0.1.0` (add +lab for the lab) from its root. lockstep has no public download yet: a
# site that mirrors it adds `git = "<its URL>"` and `version("main", branch="main")`.

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Lockstep(MakefilePackage):
    """Co-scheduling node agent and CLI for shared HPC nodes: places jobs on the right cores in
    cgroups, runs each job's ranks at the same time across nodes (boost, gang, eBPF dcs, auto),
    counts every job like perf stat, and ships locks that stay fast when threads are preempted.
    The agent, the CLI, the lock libraries, the PMPI profiler, the Slurm SPANK plugin and hooks;
    +lab adds the kernels and experiments that reproduce its papers."""

    license("Apache-2.0")

    version("0.1.0")

    variant("lab", default=False, description="Install the lab: MPI kernels, mpirun wrapper, cluster scripts")
    variant("slurm", default=True, description="Build the SPANK plugin that preloads the profiler into Slurm jobs")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("gmake", type="build")
    depends_on("cmake@3.16:", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("rust@1.91:", type="build")
    # clang compiles the dcs policy's eBPF program (-target bpf).
    depends_on("llvm+clang", type="build")

    # hwlocality uses the API of hwloc 2.8; the store's SQL needs SQLite's upsert and built-in JSON (3.38).
    depends_on("hwloc@2.8:")
    depends_on("sqlite@3.38:")
    depends_on("elfutils")
    depends_on("zlib-api")
    depends_on("openssl")
    depends_on("libpfm4")
    depends_on("slurm", when="+slurm")
    depends_on("mpi")
    depends_on("python@3.9:", type="run", when="+lab")

    # The kernels, the profiler and the mpirun wrapper know these two MPIs' flags.
    requires("^[virtuals=mpi] openmpi", "^[virtuals=mpi] mpich", policy="one_of")

    def _make_args(self):
        mpi = self.spec["mpi"]
        return [
            "NO_DEPS=1",
            f"MPI={mpi.name}",
            f"MPICC={mpi.mpicc}",
            f"MPIEXEC={join_path(mpi.prefix.bin, 'mpiexec')}",
        ]

    def build(self, spec, prefix):
        make("build", *self._make_args(), parallel=False)

    def install(self, spec, prefix):
        make(
            "install",
            *self._make_args(),
            f"PREFIX={prefix}",
            f"SYSCONFDIR={prefix.etc}",
            "LAB=" + ("yes" if spec.satisfies("+lab") else "no"),
            parallel=False,
        )

    def check(self):
        """The unit tests that need neither root nor a running agent (`make test` needs both)."""
        cargo = which("cargo", required=True)
        cargo("test", "--release", "--locked", "--workspace", "--lib")
