// probe: does the driver hand a freed pinned-host / malloc VA to a device allocation, and what does a pointer query cost
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){
  cudaFree(0); cuInit(0);
  size_t sz[]={1<<20, 2<<20, 64<<20};
  for(int s=0;s<3;s++){
    int hp=0, mp=0, ph=0;
    for(int i=0;i<200;i++){
      void *h; cudaMallocHost(&h, sz[s]); void*hh=h; cudaFreeHost(h);
      void *d; cudaMalloc(&d, sz[s]); if(d==hh) hp++; cudaFree(d);
      void *m=malloc(sz[s]); ((char*)m)[0]=1; void*mm=m; free(m);
      cudaMalloc(&d, sz[s]); if(d==mm) mp++; 
      void*dd=d; cudaFree(d); cudaMallocHost(&h, sz[s]); if(h==dd) ph++; cudaFreeHost(h);
    }
    printf("size %zu: pinned->device reuse %d/200, malloc->device %d/200, device->pinned %d/200\n", sz[s], hp, mp, ph);
  }
  // cost of pointer queries
  char *m = (char*)malloc(1<<20); void *p; cudaMallocHost(&p, 1<<20); void*d; cudaMalloc(&d,1<<20);
  CUpointer_attribute a3[3]={CU_POINTER_ATTRIBUTE_MEMORY_TYPE,CU_POINTER_ATTRIBUTE_IS_MANAGED,CU_POINTER_ATTRIBUTE_BUFFER_ID};
  unsigned mt; unsigned long long man, bid; void *dat[3]={&mt,&man,&bid};
  void *ptrs[3]={m,p,d}; const char*nm[3]={"malloc","pinned","device"};
  for(int k=0;k<3;k++){ for(int n=1;n<=3;n+=2){ int N=200000; double t0=now(); for(int i=0;i<N;i++) cuPointerGetAttributes(n,a3,dat,(CUdeviceptr)ptrs[k]); double t1=now();
    printf("%s: %d attrs %.1f ns  (memtype %u)\n", nm[k], n, (t1-t0)/N, mt);} }
  return 0;
}
