/* tests/gpu/mpi_hello.c - proves a carried MPI starts ranks that talk
 * (tests/gpu/lent.sh): every rank adds its rank, all must see the sum. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank, size, sum;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	sum = rank;
	MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	printf("rank %d of %d: sum %d\n", rank, size, sum);
	MPI_Finalize();
	return sum == size * (size - 1) / 2 ? 0 : 1;
}
